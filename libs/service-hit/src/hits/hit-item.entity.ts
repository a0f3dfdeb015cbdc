import { Column, Entity, PrimaryColumn } from 'typeorm';
import type { HitStatus } from '@mission/contracts';

@Entity('hit_items')
export class HitItemEntity {
  @PrimaryColumn('uuid')
  id!: string;

  @Column('uuid', { name: 'tenant_id' })
  tenantId!: string;

  @Column('uuid', { name: 'mission_id' })
  missionId!: string;

  @Column('int', { name: 'step_index' })
  stepIndex!: number;

  @Column('text')
  title!: string;

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
}
