import { Column, Entity, PrimaryColumn } from 'typeorm';
import type { HitStatus } from '@mission/contracts';

/** A HIT item as the service works with it: plaintext, in memory only (the repository seals it). */
export class HitItemEntity {
  id!: string;
  tenantId!: string;
  missionId!: string;
  stepIndex!: number;
  title!: string;
  description!: string | null;
  status!: HitStatus;
  comment!: string | null;
  decidedBy!: string | null;
  decidedAt!: Date | null;
  createdAt!: Date;
  updatedAt!: Date;
  /** When it expires if still pending (null: it waits for a decision however long). */
  expiresAt!: Date | null;
  /** The only users (lower-case names) who may decide it (null: anyone with the scope). */
  assignees!: string[] | null;
}

/** What people wrote: stored only as ciphertext (`HitItemRow.sealed`). */
export type HitContent = Pick<HitItemEntity, 'title' | 'description' | 'comment'>;

/**
 * A row of `hit.hit_items`: ids, tenant, status, deadline, assignees, who decided and when in clear; title,
 * description and comment in `sealed`, encrypted under the tenant's data key. The plaintext
 * columns are those of rows written before encryption, read until the row is next written.
 */
@Entity('hit_items')
export class HitItemRow {
  @PrimaryColumn('uuid')
  id!: string;

  @Column('uuid', { name: 'tenant_id' })
  tenantId!: string;

  @Column('uuid', { name: 'mission_id' })
  missionId!: string;

  @Column('int', { name: 'step_index' })
  stepIndex!: number;

  @Column('text', { nullable: true })
  sealed!: string | null;

  @Column('text', { nullable: true })
  title!: string | null;

  @Column('text', { nullable: true })
  description!: string | null;

  @Column('text')
  status!: HitStatus;

  @Column('text', { nullable: true })
  comment!: string | null;

  @Column('text', { name: 'decided_by', nullable: true })
  decidedBy!: string | null;

  @Column('timestamptz', { name: 'decided_at', nullable: true })
  decidedAt!: Date | null;

  @Column('timestamptz', { name: 'created_at' })
  createdAt!: Date;

  @Column('timestamptz', { name: 'updated_at' })
  updatedAt!: Date;

  @Column('timestamptz', { name: 'expires_at', nullable: true })
  expiresAt!: Date | null;

  @Column('text', { array: true, nullable: true })
  assignees!: string[] | null;
}
