import { Column, Entity, PrimaryColumn } from 'typeorm';
import type { Tier } from '@mission/contracts';

@Entity('tenants')
export class TenantEntity {
  @PrimaryColumn('uuid')
  id!: string;

  @Column('text')
  name!: string;

  @Column('text')
  tier!: Tier;

  /** Only enterprise tenants carry their own limit; the others take their tier's. */
  @Column('integer', { nullable: true })
  rpm!: number | null;

  /** An enterprise tenant's own storage quota; null: its tier's (bigint, read back as a number). */
  @Column('bigint', {
    name: 'storage_documents',
    nullable: true,
    transformer: { to: (value: number | null) => value, from: (value: string | null) => (value === null ? null : Number(value)) },
  })
  storageDocuments!: number | null;

  @Column('bigint', {
    name: 'storage_bytes',
    nullable: true,
    transformer: { to: (value: number | null) => value, from: (value: string | null) => (value === null ? null : Number(value)) },
  })
  storageBytes!: number | null;

  @Column('timestamptz', { name: 'created_at' })
  createdAt!: Date;
}
