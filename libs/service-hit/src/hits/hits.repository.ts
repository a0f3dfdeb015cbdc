import { EntityManager } from 'typeorm';
import { CursorPosition, isUuid } from '@mission/contracts';
import { HitItemEntity } from './hit-item.entity';

/** The only code that reads or writes HIT items. Every query is filtered by tenant. */
export class HitsRepository {
  /** Inserts unless the mission's step already has its item; returns the stored item either way. */
  async insertOnce(manager: EntityManager, item: HitItemEntity): Promise<HitItemEntity> {
    await manager
      .createQueryBuilder()
      .insert()
      .into(HitItemEntity)
      .values(item)
      .orIgnore()
      .execute();
    const stored = await manager.findOne(HitItemEntity, { where: { tenantId: item.tenantId, missionId: item.missionId, stepIndex: item.stepIndex } });
    if (!stored) throw new Error('HIT item vanished right after insert');
    return stored;
  }

  async find(manager: EntityManager, tenantId: string, id: string): Promise<HitItemEntity | null> {
    if (!isUuid(id)) return null;
    return manager.findOne(HitItemEntity, { where: { tenantId, id } });
  }

  async lock(manager: EntityManager, tenantId: string, id: string): Promise<HitItemEntity | null> {
    if (!isUuid(id)) return null;
    return manager.findOne(HitItemEntity, { where: { tenantId, id }, lock: { mode: 'pessimistic_write' } });
  }

  async save(manager: EntityManager, item: HitItemEntity): Promise<void> {
    await manager.update(
      HitItemEntity,
      { tenantId: item.tenantId, id: item.id },
      { status: item.status, comment: item.comment, decidedBy: item.decidedBy, decidedAt: item.decidedAt, updatedAt: item.updatedAt },
    );
  }

  /** Pending items, oldest first, after `after` in (created_at, id) order. Fetches one extra row to tell whether more follow. */
  async pendingPage(manager: EntityManager, tenantId: string, limit: number, after?: CursorPosition): Promise<HitItemEntity[]> {
    const query = manager
      .getRepository(HitItemEntity)
      .createQueryBuilder('h')
      .where('h.tenant_id = :tenantId', { tenantId })
      .andWhere(`h.status = 'pending'`)
      .orderBy('h.created_at', 'ASC')
      .addOrderBy('h.id', 'ASC')
      .limit(limit + 1);
    if (after) query.andWhere('(h.created_at, h.id) > (:at, :id)', { at: after.at, id: after.id });
    return query.getMany();
  }

  async cancelPendingOfMission(manager: EntityManager, tenantId: string, missionId: string, now: Date): Promise<number> {
    const result = await manager
      .createQueryBuilder()
      .update(HitItemEntity)
      .set({ status: 'cancelled', updatedAt: now })
      .where('tenant_id = :tenantId AND mission_id = :missionId AND status = :pending', { tenantId, missionId, pending: 'pending' })
      .execute();
    return result.affected ?? 0;
  }
}
