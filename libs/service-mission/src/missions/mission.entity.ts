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
};

@Entity('missions')
@Index('missions_tenant_created', ['tenantId', 'createdAt'])
export class MissionEntity {
  @PrimaryColumn('uuid')
  id!: string;

  @Column('uuid', { name: 'tenant_id' })
  tenantId!: string;

  @Column('text')
  title!: string;

  @Column('text')
  objective!: string;

  @Column('jsonb', { nullable: true })
  input!: Record<string, unknown> | null;

  @Column('jsonb')
  steps!: StoredStep[];

  @Column('jsonb')
  metadata!: Record<string, string>;

  @Column('text')
  status!: MissionStatus;

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
}
