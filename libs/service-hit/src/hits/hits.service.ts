import { randomUUID } from 'node:crypto';
import { DataSource, EntityManager } from 'typeorm';
import {
  CreateHitSchema,
  DecideHitSchema,
  decodeCursor,
  DomainError,
  encodeCursor,
  ErrorCode,
  HitCreatedEvent,
  HitDecidedEvent,
  HitExpiredEvent,
  HitView,
  ListPendingHitsSchema,
  MessageTypes,
  Page,
  parseOrThrow,
  Topics,
} from '@mission/contracts';
import { enqueueOutbox, markProcessed, RecordCipher, tenantTransaction } from '@mission/persistence';
import { currentTenant, runWithTenant } from '@mission/tenant-context';
import { HitItemEntity } from './hit-item.entity';
import { hitView } from './hit.view';
import { ExpiringItem, HitsRepository } from './hits.repository';

export const HIT_SCHEMA = 'hit';

/** Human approval tasks of the current tenant: created for approval steps, decided by people. */
export class HitsService {
  constructor(
    private readonly dataSource: DataSource,
    private readonly hits: HitsRepository,
    private readonly afterCommit: () => void,
    /** Seals `hit.decided` events in the outbox: they carry the decision's comment. */
    private readonly outboxCipher: RecordCipher,
  ) {}

  /** Creates the item of a mission's approval step, or returns the one that step already has. */
  async create(payload: unknown): Promise<HitView> {
    const request = parseOrThrow(CreateHitSchema, payload, 'HIT item');
    const { tenantId } = currentTenant();
    const now = new Date();
    const item = Object.assign(new HitItemEntity(), {
      id: randomUUID(),
      tenantId,
      missionId: request.missionId,
      stepIndex: request.stepIndex,
      title: request.title,
      description: request.description ?? null,
      status: 'pending' as const,
      comment: null,
      decidedBy: null,
      decidedAt: null,
      createdAt: now,
      updatedAt: now,
      expiresAt: request.expiresIn === undefined ? null : new Date(now.getTime() + request.expiresIn * 1000),
      assignees: request.assignees ?? null,
    });
    let created = false;
    const stored = await tenantTransaction(this.dataSource, async (manager) => {
      const found = await this.hits.insertOnce(manager, item);
      // The step's item already existed (its request delivered again): announced then, not now.
      if (found.id !== item.id) return found;
      created = true;
      const event: HitCreatedEvent = {
        hitId: found.id,
        missionId: found.missionId,
        stepIndex: found.stepIndex,
        createdAt: found.createdAt.toISOString(),
        ...(found.expiresAt ? { expiresAt: found.expiresAt.toISOString() } : {}),
        ...(found.assignees ? { assignees: [...found.assignees] } : {}),
      };
      await enqueueOutbox(manager, HIT_SCHEMA, { topic: Topics.hitEvents, type: MessageTypes.hitCreated, key: `${tenantId}:${found.missionId}`, payload: event });
      return found;
    });
    if (created) this.afterCommit();
    return hitView(stored);
  }

  async get(id: string): Promise<HitView> {
    const { tenantId } = currentTenant();
    const item = await tenantTransaction(this.dataSource, (manager) => this.hits.find(manager, tenantId, id));
    if (!item) throw DomainError.notFound('HIT item');
    return hitView(item);
  }

  /** Pending items, oldest first; those assigned to `assignee` only, when the query names one. */
  async listPending(query: unknown): Promise<Page<HitView>> {
    const { limit, cursor, assignee } = parseOrThrow(ListPendingHitsSchema, query, 'Query');
    const { tenantId } = currentTenant();
    const rows = await tenantTransaction(this.dataSource, (manager) =>
      this.hits.pendingPage(manager, tenantId, limit, cursor ? decodeCursor(cursor) : undefined, assignee?.toLowerCase()),
    );
    const items = rows.slice(0, limit);
    const last = items[items.length - 1];
    return {
      items: items.map(hitView),
      nextCursor: rows.length > limit && last ? encodeCursor({ at: last.createdAt.toISOString(), id: last.id }) : null,
    };
  }

  /**
   * Records a decision once: the row lock makes concurrent decisions queue, and every one after
   * the first finds the item decided (409). The decision and its `hit.decided` event commit
   * together. An item with assignees is decided by one of those users only (403
   * `not_an_assignee`, a machine client included). An item past its deadline is expired here, if
   * the sweep has not done it yet (its `hit.expired` commits), and the decision is refused (409):
   * whichever of the two takes the row first wins, and the other finds the item no longer pending.
   */
  async decide(payload: unknown): Promise<HitView> {
    const request = parseOrThrow(DecideHitSchema, payload, 'Decision');
    const { tenantId } = currentTenant();
    const outcome = await tenantTransaction(this.dataSource, async (manager): Promise<HitItemEntity | 'expired'> => {
      const found = await this.hits.lock(manager, tenantId, request.id);
      if (!found) throw DomainError.notFound('HIT item');
      if (found.assignees && (request.username === undefined || !found.assignees.includes(request.username.toLowerCase()))) {
        throw new DomainError(
          ErrorCode.NotAnAssignee,
          request.username === undefined
            ? 'Only the users assigned to this item may decide it, and this token is a machine client’s'
            : 'Only the users assigned to this item may decide it',
        );
      }
      if (found.status !== 'pending') throw new DomainError(ErrorCode.Conflict, `The HIT item is no longer pending (it is ${found.status})`);
      const now = new Date();
      if (found.expiresAt && found.expiresAt.getTime() <= now.getTime()) {
        await this.expireLocked(manager, found, now);
        return 'expired';
      }
      Object.assign(found, { status: request.decision, decidedBy: request.decidedBy, decidedAt: now, comment: request.comment ?? null, updatedAt: now });
      await this.hits.save(manager, found);
      const event: HitDecidedEvent = {
        hitId: found.id,
        missionId: found.missionId,
        stepIndex: found.stepIndex,
        decision: request.decision,
        decidedBy: request.decidedBy,
        decidedAt: now.toISOString(),
        ...(request.comment !== undefined ? { comment: request.comment } : {}),
      };
      await enqueueOutbox(
        manager,
        HIT_SCHEMA,
        { topic: Topics.hitEvents, type: MessageTypes.hitDecided, key: `${tenantId}:${found.missionId}`, payload: event },
        this.outboxCipher,
      );
      return found;
    });
    this.afterCommit();
    if (outcome === 'expired') throw new DomainError(ErrorCode.Conflict, 'The HIT item is no longer pending (it is expired)');
    return hitView(outcome);
  }

  /**
   * Expires the pending items past their deadline, across tenants, at most `max` a pass: each in
   * its tenant's transaction, under the row lock, once (an item decided or expired meanwhile, or
   * locked by a decision or another replica right now, is left to that), with its `hit.expired`
   * event. One item that fails does not hold up the others: the pass goes on, and its failures are
   * thrown together at the end. Returns how many items were due and how many this pass expired.
   */
  async expireDue(max = 100): Promise<{ due: number; expired: number }> {
    const due = await this.hits.dueExpiries(this.dataSource.manager, max);
    let expired = 0;
    const failures: unknown[] = [];
    for (const { tenantId, id } of due) {
      try {
        const done = await runWithTenant({ tenantId }, () =>
          tenantTransaction(this.dataSource, async (manager) => {
            const found = await this.hits.lockForExpiry(manager, tenantId, id);
            const now = new Date();
            if (!found || !found.expiresAt || found.expiresAt.getTime() > now.getTime()) return false;
            await this.expireLocked(manager, found, now);
            return true;
          }),
        );
        if (done) expired++;
      } catch (error) {
        failures.push(error);
      }
    }
    // What committed is announced now, not at the relay's next poll.
    if (expired > 0) this.afterCommit();
    if (failures.length > 0) throw new AggregateError(failures, `${failures.length} of ${due.length} approval items past their deadline could not be expired`);
    return { due: due.length, expired };
  }

  /** In the transaction holding the item's lock: the item expires, and `hit.expired` goes out with it. */
  private async expireLocked(manager: EntityManager, item: ExpiringItem, now: Date): Promise<void> {
    await this.hits.markExpired(manager, item, now);
    const event: HitExpiredEvent = { hitId: item.id, missionId: item.missionId, stepIndex: item.stepIndex, expiredAt: now.toISOString() };
    await enqueueOutbox(manager, HIT_SCHEMA, { topic: Topics.hitEvents, type: MessageTypes.hitExpired, key: `${item.tenantId}:${item.missionId}`, payload: event });
  }

  /** A cancelled mission's waiting items leave the pending list. Idempotent per message. */
  async cancelForMission(messageId: string, missionId: string): Promise<void> {
    const { tenantId } = currentTenant();
    await tenantTransaction(this.dataSource, async (manager) => {
      if (!(await markProcessed(manager, HIT_SCHEMA, 'hit-mission-events', messageId))) return;
      await this.hits.cancelPendingOfMission(manager, tenantId, missionId, new Date());
    });
  }
}
