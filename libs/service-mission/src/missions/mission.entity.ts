import { Column, Entity, Index, PrimaryColumn } from 'typeorm';
import type { MissionError, MissionStatus, MissionStepRequest, StepStatus } from '@mission/contracts';

/** The service's own PostgreSQL schema. */
export const MISSION_SCHEMA = 'mission';

/** A step as stored: its definition plus its progress. */
export type StoredStep = MissionStepRequest & {
  index: number;
  status: StepStatus;
  output?: Record<string, unknown>;
  hitId?: string;
  /** The request this step waits for a reply to (its correlation id); a reply to another is stale. */
  requestId?: string;
  /** Requests sent for this step so far (a lost reply or an unavailable dependency sends again). */
  attempts?: number;
};

/** A mission as the service works with it: plaintext, in memory only (the repository seals it). */
export class MissionEntity {
  id!: string;
  tenantId!: string;
  title!: string;
  objective!: string;
  input!: Record<string, unknown> | null;
  steps!: StoredStep[];
  metadata!: Record<string, string>;
  status!: MissionStatus;
  result!: Record<string, unknown> | null;
  error!: MissionError | null;
  createdAt!: Date;
  updatedAt!: Date;
  completedAt!: Date | null;
  /** When the runner looks at a running mission again if no reply came (null: nothing to wait for). */
  nextCheckAt!: Date | null;
  /**
   * The submitter's scopes: the authority its steps act with (a `brain.query` step needs
   * `brain:read`). Null for a mission submitted before they were recorded.
   */
  grantedScopes!: string[] | null;
}

/** What the tenant wrote or the mission produced: stored only as ciphertext (`MissionRow.sealed`). */
export type MissionContent = Pick<MissionEntity, 'title' | 'objective' | 'input' | 'steps' | 'metadata' | 'result' | 'error'> & { readonly grantedScopes?: string[] | null };

/**
 * A row of `mission.missions`: what routing and listing need (ids, tenant, status, timestamps) in
 * clear, everything else in `sealed`, encrypted under the tenant's data key. The plaintext columns
 * are those of rows written before encryption; they are read until the row is next written.
 */
@Entity('missions')
@Index('missions_tenant_created', ['tenantId', 'createdAt'])
export class MissionRow {
  @PrimaryColumn('uuid')
  id!: string;

  @Column('uuid', { name: 'tenant_id' })
  tenantId!: string;

  @Column('text')
  status!: MissionStatus;

  @Column('text', { nullable: true })
  sealed!: string | null;

  @Column('text', { nullable: true })
  title!: string | null;

  @Column('text', { nullable: true })
  objective!: string | null;

  @Column('jsonb', { nullable: true })
  input!: Record<string, unknown> | null;

  @Column('jsonb', { nullable: true })
  steps!: StoredStep[] | null;

  @Column('jsonb', { nullable: true })
  metadata!: Record<string, string> | null;

  @Column('jsonb', { nullable: true })
  result!: Record<string, unknown> | null;

  @Column('jsonb', { nullable: true })
  error!: MissionError | null;

  @Column('timestamptz', { name: 'created_at' })
  createdAt!: Date;

  @Column('timestamptz', { name: 'updated_at' })
  updatedAt!: Date;

  @Column('timestamptz', { name: 'completed_at', nullable: true })
  completedAt!: Date | null;

  @Column('timestamptz', { name: 'next_check_at', nullable: true })
  nextCheckAt!: Date | null;
}
