import { createHash, randomUUID } from 'node:crypto';
import { DataSource, EntityManager } from 'typeorm';
import {
  decodeCursor,
  DomainError,
  encodeCursor,
  ErrorCode,
  FINAL_MISSION_STATUSES,
  MessageTypes,
  MissionCancelledEvent,
  MissionQueuedEvent,
  ListMissionsQuerySchema,
  MissionView,
  Page,
  parseOrThrow,
  scopesMissionNeeds,
  SubmitMissionCommandSchema,
  SubmitMissionRequest,
  SubmitMissionSchema,
  Topics,
} from '@mission/contracts';
import { enqueueOutbox, type Queryable, tenantReader, tenantTransaction } from '@mission/persistence';
import { currentTenant } from '@mission/tenant-context';
import { announceCompletion, skipStepsAfter } from './mission.lifecycle';
import { MISSION_SCHEMA, MissionEntity, StoredStep } from './mission.entity';
import { missionView } from './mission.view';
import { FinalMissionCache } from './final-missions.cache';
import { StepRequests } from './mission.steps';
import { MissionsRepository } from './missions.repository';

/** How long an Idempotency-Key keeps standing for the mission it created. */
export const IDEMPOTENCY_TTL_HOURS = 24;

/** A stable fingerprint of a request: the same JSON in any key order hashes the same. */
export function requestFingerprint(value: unknown): string {
  const canonical = (input: unknown): unknown => {
    if (Array.isArray(input)) return input.map(canonical);
    if (input && typeof input === 'object') {
      return Object.fromEntries(
        Object.keys(input)
          .sort()
          .map((key) => [key, canonical((input as Record<string, unknown>)[key])]),
      );
    }
    return input;
  };
  return createHash('sha256')
    .update(JSON.stringify(canonical(value)))
    .digest('hex');
}

/** Mission lifecycle as the API sees it, always for the current tenant. */
export class MissionsService {
  /** Reads of one statement, each in one round trip (the hot path: clients poll missions). */
  private readonly reader: Queryable;

  constructor(
    private readonly dataSource: DataSource,
    private readonly missions: MissionsRepository,
    private readonly afterCommit: () => void,
    /** Without it (tests of the API alone), the runner sends the first step's request on mission.queued. */
    private readonly steps?: StepRequests,
    /** Final missions served from memory: they never change again. */
    private readonly finalMissions: FinalMissionCache = new FinalMissionCache(),
  ) {
    this.reader = tenantReader(dataSource);
  }

  /**
   * Stores the mission `queued` with its `mission.queued` event in one transaction. With an
   * Idempotency-Key, a repeat of the same request returns the mission the key created, another
   * request under that key is refused (422), and one racing the original is told to retry (409).
   */
  async submit(command: unknown): Promise<MissionView> {
    // A command without scopes (another producer, a gateway of an earlier version) holds none.
    const { mission: body, idempotencyKey, scopes = [] } = parseOrThrow(SubmitMissionCommandSchema, command, 'Command');
    const request = parseOrThrow(SubmitMissionSchema, body, 'Mission');
    const { tenantId } = currentTenant();
    // The gateway refused this already; a command from elsewhere on the bus is held to the same rule.
    const missing = scopesMissionNeeds(request).filter((scope) => !scopes.includes(scope));
    if (missing.length > 0) throw new DomainError(ErrorCode.InsufficientScope, `This mission's steps need the scope ${missing.join(' ')}`);
    const stored = await tenantTransaction(this.dataSource, async (manager) => {
      if (!idempotencyKey) return this.create(manager, tenantId, request, scopes);
      if (!(await this.missions.tryClaimIdempotencyKey(manager, tenantId, idempotencyKey))) {
        throw new DomainError(ErrorCode.Conflict, 'A request with this Idempotency-Key is still being processed; retry shortly');
      }
      // The body's JSON as the client sent it (key order aside), not the validated mission: one that
      // validation would normalise to the same mission is still another request. Keys stored by earlier versions hold the
      // fingerprint of the validated request, and are compared with that.
      const fingerprint = requestFingerprint(body);
      const previous = await this.missions.findIdempotencyKey(manager, tenantId, idempotencyKey, IDEMPOTENCY_TTL_HOURS);
      if (previous) {
        if (previous.requestHash !== (previous.legacy ? requestFingerprint(request) : fingerprint)) {
          throw new DomainError(ErrorCode.IdempotencyKeyReused, 'This Idempotency-Key was used with a different request body');
        }
        const original = await this.missions.findForTenant(manager, tenantId, previous.missionId);
        if (original) return original;
      }
      const created = await this.create(manager, tenantId, request, scopes);
      await this.missions.saveIdempotencyKey(manager, tenantId, idempotencyKey, fingerprint, created.id, created.createdAt);
      return created;
    });
    this.afterCommit();
    return missionView(stored);
  }

  async get(id: string): Promise<MissionView> {
    const { tenantId } = currentTenant();
    const cached = this.finalMissions.get(tenantId, id);
    if (cached) return cached;
    const mission = await this.missions.read(this.reader, tenantId, id);
    if (!mission) throw DomainError.notFound('Mission');
    const view = missionView(mission);
    this.finalMissions.offer(tenantId, view);
    return view;
  }

  /** Newest first, optionally filtered by status. */
  async list(query: unknown): Promise<Page<MissionView>> {
    const { limit, cursor, status } = parseOrThrow(ListMissionsQuerySchema, query, 'Query');
    const { tenantId } = currentTenant();
    const rows = await tenantTransaction(this.dataSource, (manager) => this.missions.page(manager, tenantId, limit, status, cursor ? decodeCursor(cursor) : undefined));
    const items = rows.slice(0, limit);
    const last = items[items.length - 1];
    return {
      items: items.map(missionView),
      nextCursor: rows.length > limit && last ? encodeCursor({ at: last.createdAt.toISOString(), id: last.id }) : null,
    };
  }

  /** Cancels a mission that is not final yet; its waiting approval item is closed by hit-service. */
  async cancel(id: string): Promise<MissionView> {
    const { tenantId } = currentTenant();
    const mission = await tenantTransaction(this.dataSource, async (manager) => {
      const found = await this.missions.lockForTenant(manager, tenantId, id);
      if (!found) throw DomainError.notFound('Mission');
      if (FINAL_MISSION_STATUSES.includes(found.status)) throw new DomainError(ErrorCode.Conflict, `The mission is already ${found.status}`);
      const now = new Date();
      found.status = 'cancelled';
      found.completedAt = now;
      found.nextCheckAt = null;
      found.updatedAt = now;
      skipStepsAfter(found, -1);
      await this.missions.save(manager, found);
      const event: MissionCancelledEvent = { missionId: found.id };
      await enqueueOutbox(manager, MISSION_SCHEMA, { topic: Topics.missionEvents, type: MessageTypes.missionCancelled, key: `${tenantId}:${found.id}`, payload: event });
      await announceCompletion(manager, found);
      return found;
    });
    this.afterCommit();
    return missionView(mission);
  }

  private async create(manager: EntityManager, tenantId: string, request: SubmitMissionRequest, scopes: readonly string[]): Promise<MissionEntity> {
    const now = new Date();
    const steps: StoredStep[] = (request.steps ?? [{ type: 'brain.query' as const }]).map((step, index) => ({ ...step, index, status: 'pending' }));
    const mission = Object.assign(new MissionEntity(), {
      id: randomUUID(),
      tenantId,
      title: request.title,
      objective: request.objective,
      input: request.input ?? null,
      steps,
      metadata: request.metadata ?? {},
      // What its steps may do, for the runner to check (missions stored before this was recorded have null).
      grantedScopes: [...scopes],
      status: 'queued' as const,
      result: null,
      error: null,
      createdAt: now,
      updatedAt: now,
      completedAt: null,
      nextCheckAt: null,
    });
    // A first Brain query leaves with the submit (one relay pass instead of two hops); the mission
    // shows `queued` and the step `pending` until the runner or the step's reply moves them. A
    // first approval waits for the runner: an item made before a quick cancel reached hit-service
    // would stay pending for a cancelled mission.
    const first = mission.steps[0];
    const firstStepSent = this.steps !== undefined && first?.type === 'brain.query';
    if (firstStepSent) await this.steps?.send(manager, mission, first, now);
    await this.missions.insert(manager, mission);
    const event: MissionQueuedEvent = { missionId: mission.id, ...(firstStepSent ? { firstStepSent } : {}) };
    await enqueueOutbox(manager, MISSION_SCHEMA, { topic: Topics.missionEvents, type: MessageTypes.missionQueued, key: `${tenantId}:${mission.id}`, payload: event });
    return mission;
  }
}
