import { DataSource, EntityManager } from 'typeorm';
import type { QueryDeepPartialEntity } from 'typeorm/query-builder/QueryPartialEntity';
import { isUuid } from '@mission/contracts';
import { MissionEntity } from './mission.entity';

/** The only code that reads or writes missions. Every read is filtered by tenant. */
export class MissionsRepository {
  constructor(private readonly dataSource: DataSource) {}

  async insert(manager: EntityManager, mission: MissionEntity): Promise<void> {
    // jsonb columns hold open-ended objects, which TypeORM's deep-partial type cannot express.
    await manager.insert(MissionEntity, mission as QueryDeepPartialEntity<MissionEntity>);
  }

  /** A malformed id cannot exist, so it is simply not found (no query). */
  async findForTenant(manager: EntityManager, tenantId: string, id: string): Promise<MissionEntity | null> {
    if (!isUuid(id)) return null;
    return manager.findOne(MissionEntity, { where: { tenantId, id } });
  }

  async lockForTenant(manager: EntityManager, tenantId: string, id: string): Promise<MissionEntity | null> {
    if (!isUuid(id)) return null;
    return manager.findOne(MissionEntity, { where: { tenantId, id }, lock: { mode: 'pessimistic_write' } });
  }

  async save(manager: EntityManager, mission: MissionEntity): Promise<void> {
    await manager.update(
      MissionEntity,
      { id: mission.id, tenantId: mission.tenantId },
      {
        status: mission.status,
        steps: mission.steps,
        result: mission.result,
        error: mission.error,
        updatedAt: mission.updatedAt,
        completedAt: mission.completedAt,
      } as QueryDeepPartialEntity<MissionEntity>,
    );
  }

  /** Missions a runner must pick up again after a restart (system-wide, oldest first). */
  async findUnfinished(limit: number): Promise<Array<Pick<MissionEntity, 'id' | 'tenantId'>>> {
    return this.dataSource
      .getRepository(MissionEntity)
      .createQueryBuilder('m')
      .select(['m.id', 'm.tenantId'])
      .where(`m.status IN ('queued', 'running')`)
      .orderBy('m.updatedAt', 'ASC')
      .limit(limit)
      .getMany();
  }
}
