import { EntityManager } from 'typeorm';
import { CursorPosition, isUuid } from '@mission/contracts';
import { RecordCipher } from '@mission/persistence';
import { HitContent, HitItemEntity, HitItemRow } from './hit-item.entity';

const TABLE = 'hit_items';

/** What expiring an item needs of it. */
export interface ExpiringItem {
  readonly id: string;
  readonly tenantId: string;
  readonly missionId: string;
  readonly stepIndex: number;
  readonly expiresAt: Date | null;
}

/**
 * The only code that reads or writes HIT items. Every query is filtered by tenant; what people
 * wrote is sealed on the way in and opened on the way out (RecordCipher).
 */
export class HitsRepository {
  constructor(private readonly cipher: RecordCipher) {}

  /** Inserts unless the mission's step already has its item; returns the stored item either way. */
  async insertOnce(manager: EntityManager, item: HitItemEntity): Promise<HitItemEntity> {
    await manager
      .createQueryBuilder()
      .insert()
      .into(HitItemRow)
      .values(await this.toRow(manager, item))
      .orIgnore()
      .execute();
    const stored = await this.toEntity(manager, await manager.findOne(HitItemRow, { where: { tenantId: item.tenantId, missionId: item.missionId, stepIndex: item.stepIndex } }));
    if (!stored) throw new Error('HIT item vanished right after insert');
    return stored;
  }

  async find(manager: EntityManager, tenantId: string, id: string): Promise<HitItemEntity | null> {
    if (!isUuid(id)) return null;
    return this.toEntity(manager, await manager.findOne(HitItemRow, { where: { tenantId, id } }));
  }

  async lock(manager: EntityManager, tenantId: string, id: string): Promise<HitItemEntity | null> {
    if (!isUuid(id)) return null;
    return this.toEntity(manager, await manager.findOne(HitItemRow, { where: { tenantId, id }, lock: { mode: 'pessimistic_write' } }));
  }

  async save(manager: EntityManager, item: HitItemEntity): Promise<void> {
    const row = await this.toRow(manager, item);
    await manager.update(
      HitItemRow,
      { tenantId: item.tenantId, id: item.id },
      { status: row.status, sealed: row.sealed, title: null, description: null, comment: null, decidedBy: row.decidedBy, decidedAt: row.decidedAt, updatedAt: row.updatedAt },
    );
  }

  /** Marks a pending item expired (its content unchanged). */
  async markExpired(manager: EntityManager, item: ExpiringItem, now: Date): Promise<void> {
    await manager.update(HitItemRow, { tenantId: item.tenantId, id: item.id, status: 'pending' }, { status: 'expired', updatedAt: now });
  }

  /**
   * Locks a pending item for its expiry, reading only what that needs (nothing sealed: an item
   * whose content cannot be opened still expires); null when it is not pending or another
   * transaction holds it (a decision, or another replica's sweep, which settles it).
   */
  async lockForExpiry(manager: EntityManager, tenantId: string, id: string): Promise<ExpiringItem | null> {
    const [row]: Array<{ id: string; tenant_id: string; mission_id: string; step_index: number; expires_at: Date | null }> = await manager.query(
      `SELECT id, tenant_id, mission_id, step_index, expires_at FROM hit.hit_items WHERE tenant_id = $1 AND id = $2 AND status = $3 FOR UPDATE SKIP LOCKED`,
      [tenantId, id, 'pending'],
    );
    return row ? { id: row.id, tenantId: row.tenant_id, missionId: row.mission_id, stepIndex: row.step_index, expiresAt: row.expires_at } : null;
  }

  /** Pending items past their deadline, across tenants (ids only), soonest first: the migration's SECURITY DEFINER function. */
  async dueExpiries(manager: EntityManager, max: number): Promise<Array<{ tenantId: string; id: string }>> {
    const rows: Array<{ tenant_id: string; id: string }> = await manager.query(`SELECT tenant_id, id FROM hit.due_expiries($1)`, [max]);
    return rows.map((row) => ({ tenantId: row.tenant_id, id: row.id }));
  }

  /**
   * Pending items (those of `assignee` only, if given), oldest first, after `after` in
   * (created_at, id) order. Fetches one extra row to tell whether more follow.
   */
  async pendingPage(manager: EntityManager, tenantId: string, limit: number, after?: CursorPosition, assignee?: string): Promise<HitItemEntity[]> {
    const query = manager
      .getRepository(HitItemRow)
      .createQueryBuilder('h')
      .where('h.tenant_id = :tenantId', { tenantId })
      .andWhere(`h.status = 'pending'`)
      .orderBy('h.created_at', 'ASC')
      .addOrderBy('h.id', 'ASC')
      .limit(limit + 1);
    if (after) query.andWhere('(h.created_at, h.id) > (:at, :id)', { at: after.at, id: after.id });
    if (assignee !== undefined) query.andWhere(':assignee = ANY(h.assignees)', { assignee });
    const rows = await query.getMany();
    const items: HitItemEntity[] = [];
    // One at a time: a key not cached yet is read on the transaction's one connection.
    for (const row of rows) items.push((await this.toEntity(manager, row)) as HitItemEntity);
    return items;
  }

  async cancelPendingOfMission(manager: EntityManager, tenantId: string, missionId: string, now: Date): Promise<number> {
    const result = await manager
      .createQueryBuilder()
      .update(HitItemRow)
      .set({ status: 'cancelled', updatedAt: now })
      .where('tenant_id = :tenantId AND mission_id = :missionId AND status = :pending', { tenantId, missionId, pending: 'pending' })
      .execute();
    return result.affected ?? 0;
  }

  private async toRow(manager: EntityManager, item: HitItemEntity): Promise<HitItemRow> {
    const content: HitContent = { title: item.title, description: item.description, comment: item.comment };
    return {
      id: item.id,
      tenantId: item.tenantId,
      missionId: item.missionId,
      stepIndex: item.stepIndex,
      sealed: await this.cipher.seal(manager, { table: TABLE, id: item.id }, content),
      title: null,
      description: null,
      status: item.status,
      comment: null,
      decidedBy: item.decidedBy,
      decidedAt: item.decidedAt,
      createdAt: item.createdAt,
      updatedAt: item.updatedAt,
      expiresAt: item.expiresAt,
      assignees: item.assignees,
    };
  }

  private async toEntity(manager: EntityManager, row: HitItemRow | null): Promise<HitItemEntity | null> {
    if (!row) return null;
    const content: HitContent = row.sealed
      ? await this.cipher.open<HitContent>(manager, { table: TABLE, id: row.id }, row.sealed)
      : { title: row.title ?? '', description: row.description, comment: row.comment };
    return Object.assign(new HitItemEntity(), {
      id: row.id,
      tenantId: row.tenantId,
      missionId: row.missionId,
      stepIndex: row.stepIndex,
      ...content,
      status: row.status,
      decidedBy: row.decidedBy,
      decidedAt: row.decidedAt,
      createdAt: row.createdAt,
      updatedAt: row.updatedAt,
      expiresAt: row.expiresAt ?? null,
      assignees: row.assignees ?? null,
    });
  }
}
