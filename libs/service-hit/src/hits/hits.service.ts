import { randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import {
  CreateHitSchema,
  DecideHitSchema,
  decodeCursor,
  DomainError,
  encodeCursor,
  ErrorCode,
  HitCreatedEvent,
  HitDecidedEvent,
  HitView,
  MessageTypes,
  Page,
  PageQuerySchema,
  parseOrThrow,
  Topics,
} from '@mission/contracts';
import { enqueueOutbox, markProcessed, RecordCipher, tenantTransaction } from '@mission/persistence';
import { currentTenant } from '@mission/tenant-context';
import { HitItemEntity } from './hit-item.entity';
import { hitView } from './hit.view';
import { HitsRepository } from './hits.repository';

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
    });
    let created = false;
    const stored = await tenantTransaction(this.dataSource, async (manager) => {
      const found = await this.hits.insertOnce(manager, item);
      // The step's item already existed (its request delivered again): announced then, not now.
      if (found.id !== item.id) return found;
      created = true;
      const event: HitCreatedEvent = { hitId: found.id, missionId: found.missionId, stepIndex: found.stepIndex, createdAt: found.createdAt.toISOString() };
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

  async listPending(query: unknown): Promise<Page<HitView>> {
    const { limit, cursor } = parseOrThrow(PageQuerySchema, query, 'Query');
    const { tenantId } = currentTenant();
    const rows = await tenantTransaction(this.dataSource, (manager) => this.hits.pendingPage(manager, tenantId, limit, cursor ? decodeCursor(cursor) : undefined));
    const items = rows.slice(0, limit);
    const last = items[items.length - 1];
    return {
      items: items.map(hitView),
      nextCursor: rows.length > limit && last ? encodeCursor({ at: last.createdAt.toISOString(), id: last.id }) : null,
    };
  }

  /**
   * Records a decision once: the row lock makes concurrent decisions queue, and every one after
   * the first finds the item decided (409). The decision and its `hit.decided` event commit together.
   */
  async decide(payload: unknown): Promise<HitView> {
    const request = parseOrThrow(DecideHitSchema, payload, 'Decision');
    const { tenantId } = currentTenant();
    const item = await tenantTransaction(this.dataSource, async (manager) => {
      const found = await this.hits.lock(manager, tenantId, request.id);
      if (!found) throw DomainError.notFound('HIT item');
      if (found.status !== 'pending') throw new DomainError(ErrorCode.Conflict, `The HIT item is no longer pending (it is ${found.status})`);
      const now = new Date();
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
    return hitView(item);
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
