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

  @Column('timestamptz', { name: 'created_at' })
  createdAt!: Date;
}
