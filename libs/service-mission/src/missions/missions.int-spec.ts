import { createHash, randomUUID } from 'node:crypto';
import { Client } from 'pg';
import {
  BrainQueryResult,
  BrainQuerySchema,
  DomainError,
  ErrorCode,
  FINAL_MISSION_STATUSES,
  MessageTypes,
  MissionStatus,
  MissionView,
  parseOrThrow,
  SubmitMissionSchema,
  Topics,
} from '@mission/contracts';
import { BusLogger, InProcessBroker, InProcessBus } from '@mission/messaging';
import { KeyEncryptionKey, LocalKeyProvider } from '@mission/crypto';
import { createTestDatabase, Housekeeper, processedMessagesSweep, publishedOutboxSweep, RecordCipher, tenantTransaction, TestDatabase } from '@mission/persistence';
import { currentTenant, runWithTenant, TENANT_HEADER } from '@mission/tenant-context';
import { MissionServiceHandle, openMissionDatabase, startMissionService } from '../mission-service';
import { MissionEntity } from './mission.entity';
import { expiredIdempotencyKeysSweep, MissionsRepository } from './missions.repository';
import { requestFingerprint } from './missions.service';
import { domainErrorOf } from '@mission/messaging/testing';

const ADMIN_URL = process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const KEYS = new LocalKeyProvider(KeyEncryptionKey.generate());
/** What the gateway sends for a caller holding every tenant scope. */
const ALL_SCOPES = ['missions:read', 'missions:write', 'brain:read', 'brain:write', 'hits:read', 'hits:approve'];

interface LogEntry {
  readonly level: string;
  readonly message: string;
  readonly context?: Record<string, unknown>;
}

/** Keeps log lines for inspection instead of printing them. */
class RecordingLogger implements BusLogger {
  readonly entries: LogEntry[] = [];
  info(message: string, context?: Record<string, unknown>): void {
    this.entries.push({ level: 'info', message, context });
  }
  warn(message: string, context?: Record<string, unknown>): void {
    this.entries.push({ level: 'warn', message, context });
  }
  error(message: string, context?: Record<string, unknown>): void {
    this.entries.push({ level: 'error', message, context });
  }
}

interface BrainCall {
  readonly q: string;
  readonly k: number;
  readonly key: string;
  readonly tenantId: string;
}

/** The same UUID for the same text: canned ids that a reply's schema accepts. */
function uuidOf(text: string): string {
  const hex = createHash('sha256').update(text).digest('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-8${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}

function cannedResults(q: string): BrainQueryResult['results'] {
  return [{ documentId: uuidOf(`doc:${q}`), chunkId: uuidOf(`chunk:${q}`), title: q, text: `What the brain knows about ${q}`, score: 0.9 }];
}

/**
 * Stands in for brain-service on its own bus: answers `brain.query` with canned results, refuses
 * queries starting with "refuse:" as invalid, and reports itself unavailable for queries listed
 * in `down` or, once each, in `flakyOnce`.
 */
class CannedBrain {
  readonly calls: BrainCall[] = [];
  readonly down = new Set<string>();
  readonly flakyOnce = new Set<string>();
  /** Queries answered only after this many ms, per call in turn (a reply that comes late). */
  readonly delays = new Map<string, number[]>();

  async query(payload: unknown, key: string): Promise<BrainQueryResult> {
    const request = parseOrThrow(BrainQuerySchema, payload, 'Query');
    const call = this.calls.push({ q: request.q, k: request.k, key, tenantId: currentTenant().tenantId });
    const delay = this.delays.get(request.q)?.shift();
    if (delay !== undefined) {
      await new Promise((resolve) => setTimeout(resolve, delay));
      return { query: request.q, results: cannedResults(`${request.q} (call ${call})`) };
    }
    if (this.down.has(request.q)) throw new DomainError(ErrorCode.DependencyUnavailable, 'The brain index is warming up');
    if (this.flakyOnce.delete(request.q)) throw new DomainError(ErrorCode.DependencyUnavailable, 'The brain index is warming up');
    if (request.q.startsWith('refuse:')) throw new DomainError(ErrorCode.ValidationFailed, 'Query is not allowed', [{ field: 'q', message: 'not allowed' }]);
    return { query: request.q, results: cannedResults(request.q) };
  }

  queries(): string[] {
    return this.calls.map((call) => call.q);
  }
}

const RETRY = { attempts: 3, initialBackoffMs: 20, maxBackoffMs: 50 };
/** A step reply is awaited 1.5 s; an unavailable dependency is asked again after 50 ms, doubling up to 200 ms, 25 times at most. */
const TIMINGS = { replyTimeoutMs: 1_500, retryInitialMs: 50, retryMaxMs: 200, maxAttempts: 25 };
const hitItems = new Map<string, string>();
/** Approval titles whose item is created at once but answered only after this many ms (a late reply). */
const hitReplyDelays = new Map<string, number>();

describe('missions on PostgreSQL with an in-process bus', () => {
  let database: TestDatabase;
  let inspector: Client;
  const broker = new InProcessBroker();
  const busLogger = new RecordingLogger();
  const brain = new CannedBrain();
  const brainBus = new InProcessBus(broker, { logger: busLogger });
  const client = new InProcessBus(broker, { logger: busLogger });
  let mission: { bus: InProcessBus; handle: MissionServiceHandle; logger: RecordingLogger };

  /** Starts mission-service as its process entry point does: handlers, bus, then relay and resume. */
  async function startMission(): Promise<typeof mission> {
    const bus = new InProcessBus(broker, { retry: RETRY, logger: busLogger });
    const logger = new RecordingLogger();
    const handle = await startMissionService({ databaseUrl: database.url, bus, logger, keys: KEYS, runnerTimings: TIMINGS, dueCheckIntervalMs: 50 });
    await bus.start();
    await handle.afterBusStart();
    return { bus, handle, logger };
  }

  async function stopMission(): Promise<void> {
    await mission.bus.close();
    await mission.handle.stop();
  }

  function submit(tenantId: string, body: unknown, idempotencyKey?: string): Promise<MissionView> {
    return runWithTenant({ tenantId }, () =>
      client.request<MissionView>(Topics.missionRequests, MessageTypes.missionSubmit, { mission: body, scopes: ALL_SCOPES, ...(idempotencyKey ? { idempotencyKey } : {}) }),
    );
  }

  function get(tenantId: string, id: string): Promise<MissionView> {
    return runWithTenant({ tenantId }, () => client.request<MissionView>(Topics.missionRequests, MessageTypes.missionGet, { id }));
  }

  async function waitForMission(tenantId: string, id: string, statuses: readonly MissionStatus[] = FINAL_MISSION_STATUSES, timeoutMs = 10_000): Promise<MissionView> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const view = await get(tenantId, id);
      if (statuses.includes(view.status)) return view;
      if (Date.now() > deadline) throw new Error(`mission ${id} is still ${view.status} after ${timeoutMs} ms, expected ${statuses.join(' or ')}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  async function waitUntil(condition: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!condition()) {
      if (Date.now() > deadline) throw new Error(`${what} did not happen within ${timeoutMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }

  beforeAll(async () => {
    database = await createTestDatabase(ADMIN_URL, 'mission_test');
    inspector = new Client({ connectionString: database.url });
    await inspector.connect();
    brainBus.serve(Topics.brainRequests, 'brain-service', {
      [MessageTypes.brainQuery]: (message) => brain.query(message.payload, message.key),
    });
    // hit-service's side of an approval step: one item per (mission, step), created idempotently.
    brainBus.serve(Topics.hitRequests, 'hit-service', {
      [MessageTypes.hitCreate]: async (message) => {
        const request = message.payload as { missionId: string; stepIndex: number; title: string };
        const key = `${currentTenant().tenantId}:${request.missionId}:${request.stepIndex}`;
        const id = hitItems.get(key) ?? randomUUID();
        hitItems.set(key, id);
        const delay = hitReplyDelays.get(request.title);
        if (delay !== undefined) await new Promise((resolve) => setTimeout(resolve, delay));
        return { id, missionId: request.missionId, title: request.title, status: 'pending', createdAt: new Date().toISOString() };
      },
    });
    await brainBus.start();
    await client.start();
    mission = await startMission();
  });

  afterAll(async () => {
    if (mission) await stopMission();
    await client.close();
    await brainBus.close();
    await inspector?.end();
    await database?.drop();
  });

  describe('submit', () => {
    it('stores the mission queued together with its mission.queued outbox event', async () => {
      const tenantId = randomUUID();
      const submitted = await submit(tenantId, { title: 'Survey', objective: 'Find the survey results' });
      expect(submitted).toMatchObject({ title: 'Survey', objective: 'Find the survey results', status: 'queued', steps: [{ index: 0, type: 'brain.query', status: 'pending' }] });

      const { rows: missions } = await inspector.query(`SELECT tenant_id FROM mission.missions WHERE id = $1`, [submitted.id]);
      expect(missions).toEqual([{ tenant_id: tenantId }]);
      const { rows: events } = await inspector.query(`SELECT topic, type, key, payload, headers FROM mission.outbox WHERE payload->>'missionId' = $1`, [submitted.id]);
      expect(events).toEqual([
        {
          topic: Topics.missionEvents,
          type: MessageTypes.missionQueued,
          key: `${tenantId}:${submitted.id}`,
          payload: { missionId: submitted.id, firstStepSent: true },
          headers: { [TENANT_HEADER]: tenantId, traceparent: expect.stringMatching(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/) },
        },
      ]);
      await waitForMission(tenantId, submitted.id);
    });

    it('stores no mission when its outbox event cannot be written', async () => {
      const tenantId = randomUUID();
      await inspector.query(`ALTER TABLE mission.outbox ADD CONSTRAINT outbox_refuses_writes CHECK (false) NOT VALID`);
      try {
        const error = await domainErrorOf(submit(tenantId, { title: 'Doomed', objective: 'Never stored' }));
        expect(error.code).toBe(ErrorCode.Internal);
      } finally {
        await inspector.query(`ALTER TABLE mission.outbox DROP CONSTRAINT outbox_refuses_writes`);
      }
      const { rows } = await inspector.query(`SELECT count(*)::int AS n FROM mission.missions WHERE tenant_id = $1`, [tenantId]);
      expect(rows).toEqual([{ n: 0 }]);
    });

    it('stores an Idempotency-Key with its request fingerprint sealed, bound to the key', async () => {
      const tenantId = randomUUID();
      const body = { title: 'Once', objective: 'Only once' };
      const first = await submit(tenantId, body, 'key-one');
      const second = await submit(tenantId, { ...body, title: 'Twice' }, 'key-two');
      const { rows } = await inspector.query(`SELECT key, request_hash FROM mission.idempotency_keys WHERE tenant_id = $1 ORDER BY key`, [tenantId]);
      expect(rows.map((row: { key: string }) => row.key)).toEqual(['key-one', 'key-two']);
      for (const row of rows) expect(row.request_hash).toMatch(/^enc1\./);
      expect(rows[0].request_hash).not.toContain(requestFingerprint(body));
      expect((await submit(tenantId, body, 'key-one')).id).toBe(first.id);
      expect((await domainErrorOf(submit(tenantId, body, 'key-two'))).code).toBe(ErrorCode.IdempotencyKeyReused);
      // Validation would trim this title to the same mission; it is still another request.
      expect((await domainErrorOf(submit(tenantId, { ...body, title: ' Once ' }, 'key-one'))).code).toBe(ErrorCode.IdempotencyKeyReused);

      // A mission id swapped in the clear column no longer matches the sealed one: refused, not answered with the other mission.
      await inspector.query(`UPDATE mission.idempotency_keys SET mission_id = $2 WHERE tenant_id = $1 AND key = 'key-one'`, [tenantId, second.id]);
      expect((await domainErrorOf(submit(tenantId, body, 'key-one'))).code).toBe(ErrorCode.Internal);
      // A sealed fingerprint copied to another key does not open there: refused, not matched.
      await inspector.query(`UPDATE mission.idempotency_keys SET request_hash = $2 WHERE tenant_id = $1 AND key = 'key-two'`, [tenantId, rows[0].request_hash]);
      expect((await domainErrorOf(submit(tenantId, body, 'key-two'))).code).toBe(ErrorCode.Internal);
      await waitForMission(tenantId, first.id);
      await waitForMission(tenantId, second.id);
    });

    it('still reads the bare fingerprint (of the validated request) of a key stored before fingerprints were sealed', async () => {
      const tenantId = randomUUID();
      // Validation trims the title, so the older fingerprint (of the validated request) differs from the body's own.
      const body = { title: '  Legacy  ', objective: 'Stored by an older version' };
      expect(requestFingerprint(parseOrThrow(SubmitMissionSchema, body, 'Mission'))).not.toBe(requestFingerprint(body));
      const first = await submit(tenantId, body, 'legacy');
      await inspector.query(`UPDATE mission.idempotency_keys SET request_hash = $2 WHERE tenant_id = $1 AND key = 'legacy'`, [
        tenantId,
        requestFingerprint(parseOrThrow(SubmitMissionSchema, body, 'Mission')),
      ]);
      expect((await submit(tenantId, body, 'legacy')).id).toBe(first.id);
      expect((await domainErrorOf(submit(tenantId, { ...body, title: 'Changed' }, 'legacy'))).code).toBe(ErrorCode.IdempotencyKeyReused);
      await waitForMission(tenantId, first.id);
    });

    it('refuses an invalid mission with validation_failed and stores nothing', async () => {
      const tenantId = randomUUID();
      const error = await domainErrorOf(submit(tenantId, { title: '', objective: 'x', steps: [{ type: 'teleport' }] }));
      expect(error.code).toBe(ErrorCode.ValidationFailed);
      expect(error.errors?.map((field) => field.field)).toEqual(expect.arrayContaining(['title', 'steps.0.type']));
      const { rows } = await inspector.query(`SELECT count(*)::int AS n FROM mission.missions WHERE tenant_id = $1`, [tenantId]);
      expect(rows).toEqual([{ n: 0 }]);
    });
  });

  describe('runner', () => {
    it('runs the steps in order through the brain and ends succeeded with every step output in result.steps', async () => {
      const tenantId = randomUUID();
      const { id } = await submit(tenantId, {
        title: 'Two lookups',
        objective: 'Compare two things',
        steps: [
          { type: 'brain.query', query: 'first thing', k: 2 },
          { type: 'brain.query', query: 'second thing' },
        ],
      });

      const done = await waitForMission(tenantId, id);

      expect(done.status).toBe('succeeded');
      expect(done.steps).toEqual([
        { index: 0, type: 'brain.query', status: 'succeeded', output: { results: cannedResults('first thing') } },
        { index: 1, type: 'brain.query', status: 'succeeded', output: { results: cannedResults('second thing') } },
      ]);
      expect(done.result).toEqual({ steps: [{ results: cannedResults('first thing') }, { results: cannedResults('second thing') }] });
      expect(done.error).toBeUndefined();
      expect(done.completedAt).toEqual(expect.any(String));
      const calls = brain.calls.filter((call) => call.tenantId === tenantId);
      expect(calls).toEqual([
        { q: 'first thing', k: 2, key: `${tenantId}:${id}`, tenantId },
        { q: 'second thing', k: 5, key: `${tenantId}:${id}`, tenantId },
      ]);
    });

    it('marks a mission whose first Brain query left with the submit running, and shows that step running until its reply', async () => {
      const tenantId = randomUUID();
      brain.delays.set('a slow first step', [800]);
      const { id } = await submit(tenantId, { title: 'Slow', objective: 'Wait for the brain', steps: [{ type: 'brain.query', query: 'a slow first step' }] });
      const running = await waitForMission(tenantId, id, ['running']);
      expect(running.steps.map((step) => step.status)).toEqual(['running']);
      const done = await waitForMission(tenantId, id);
      expect(done).toMatchObject({ status: 'succeeded', steps: [{ status: 'succeeded' }] });
      expect(brain.calls.filter((call) => call.tenantId === tenantId)).toHaveLength(1);
    });

    it('queries the brain with the objective when the mission names no steps', async () => {
      const tenantId = randomUUID();
      const { id } = await submit(tenantId, { title: 'Default step', objective: 'What is the default?' });
      const done = await waitForMission(tenantId, id);
      expect(done.status).toBe('succeeded');
      expect(brain.calls.filter((call) => call.tenantId === tenantId).map((call) => call.q)).toEqual(['What is the default?']);
    });

    it('holds a Brain step to the scopes that came with the command: refused at submit, and never run from a mission recorded without them', async () => {
      const tenantId = randomUUID();
      const command = (scopes: string[]) => ({ mission: { title: 'Scoped', objective: 'What may I read?' }, scopes });
      const refused = await domainErrorOf(runWithTenant({ tenantId }, () => client.request(Topics.missionRequests, MessageTypes.missionSubmit, command(['missions:write']))));
      expect(refused).toMatchObject({ code: ErrorCode.InsufficientScope, message: expect.stringContaining('brain:read') });
      // A command that names no scopes holds none.
      const bare = await domainErrorOf(
        runWithTenant({ tenantId }, () => client.request(Topics.missionRequests, MessageTypes.missionSubmit, { mission: { title: 'Bare', objective: 'o' } })),
      );
      expect(bare).toMatchObject({ code: ErrorCode.InsufficientScope });
      expect((await inspector.query(`SELECT count(*)::int AS n FROM mission.missions WHERE tenant_id = $1`, [tenantId])).rows[0].n).toBe(0);
      const allowed = await runWithTenant({ tenantId }, () =>
        client.request<MissionView>(Topics.missionRequests, MessageTypes.missionSubmit, command(['missions:write', 'brain:read'])),
      );
      expect((await waitForMission(tenantId, allowed.id)).status).toBe('succeeded');

      // A mission stored with scopes that lack brain:read (as no submit can store it any more), due for the runner.
      const serviceDatabase = await openMissionDatabase(database.url);
      const stored = randomUUID();
      try {
        const repository = new MissionsRepository(serviceDatabase, new RecordCipher('mission', KEYS));
        const now = new Date();
        await runWithTenant({ tenantId }, () =>
          tenantTransaction(serviceDatabase, (manager) =>
            repository.insert(
              manager,
              Object.assign(new MissionEntity(), {
                id: stored,
                tenantId,
                title: 'Recorded without brain:read',
                objective: 'secret passages',
                input: null,
                steps: [{ type: 'brain.query', index: 0, status: 'pending' }],
                metadata: {},
                grantedScopes: ['missions:write'],
                status: 'queued',
                result: null,
                error: null,
                createdAt: now,
                updatedAt: now,
                completedAt: null,
                nextCheckAt: new Date(now.getTime() - 1_000),
              }),
            ),
          ),
        );
      } finally {
        await serviceDatabase.destroy();
      }
      const failed = await waitForMission(tenantId, stored);
      expect(failed).toMatchObject({ status: 'failed', error: { code: ErrorCode.InsufficientScope }, steps: [{ status: 'failed' }] });
      expect(failed.steps[0]).not.toHaveProperty('output');
      expect(brain.calls.filter((call) => call.tenantId === tenantId).map((call) => call.q)).toEqual(['What may I read?']);
    });

    it('fails the mission with the brain’s error code and skips the later steps when the brain refuses a query', async () => {
      const tenantId = randomUUID();
      const { id } = await submit(tenantId, {
        title: 'Refused',
        objective: 'Ask something forbidden',
        steps: [
          { type: 'brain.query', query: 'allowed question' },
          { type: 'brain.query', query: 'refuse: forbidden question' },
          { type: 'brain.query', query: 'never asked' },
        ],
      });

      const done = await waitForMission(tenantId, id);

      expect(done.status).toBe('failed');
      expect(done.error).toEqual({ code: ErrorCode.ValidationFailed, message: 'Query is not allowed' });
      expect(done.steps.map((step) => step.status)).toEqual(['succeeded', 'failed', 'skipped']);
      expect(done.result).toBeUndefined();
      expect(done.completedAt).toEqual(expect.any(String));
      expect(brain.calls.filter((call) => call.tenantId === tenantId).map((call) => call.q)).toEqual(['allowed question', 'refuse: forbidden question']);
    });

    function decide(tenantId: string, missionId: string, hitId: string, decision: 'approved' | 'rejected', messageId = randomUUID(), stepIndex = 1): Promise<void> {
      return runWithTenant({ tenantId }, () =>
        client.publish(Topics.hitEvents, {
          id: messageId,
          type: MessageTypes.hitDecided,
          key: `${tenantId}:${missionId}`,
          payload: { hitId, missionId, stepIndex, decision, decidedBy: 'reviewer', decidedAt: new Date().toISOString() },
        }),
      );
    }

    it('parks the mission at an approval step and resumes it on approval, once even if the decision is delivered twice', async () => {
      const tenantId = randomUUID();
      const { id } = await submit(tenantId, {
        title: 'Needs sign-off',
        objective: 'Look, then ask a human',
        steps: [
          { type: 'brain.query', query: 'before approval' },
          { type: 'approval', title: 'Sign off' },
          { type: 'brain.query', query: 'after approval' },
        ],
      });
      const waiting = await waitForMission(tenantId, id, ['awaiting_approval']);
      expect(waiting.steps.map((step) => step.status)).toEqual(['succeeded', 'running', 'pending']);
      const hitId = waiting.steps[1]?.hitId ?? '';
      expect(hitId).toBe(hitItems.get(`${tenantId}:${id}:1`));

      const messageId = randomUUID();
      await decide(tenantId, id, hitId, 'approved', messageId);
      await decide(tenantId, id, hitId, 'approved', messageId);
      const done = await waitForMission(tenantId, id);

      expect(done.status).toBe('succeeded');
      expect(done.steps[1]?.output).toEqual({ hitId, decision: 'approved', decidedBy: 'reviewer' });
      expect(brain.calls.filter((call) => call.tenantId === tenantId).map((call) => call.q)).toEqual(['before approval', 'after approval']);
      const { rows } = await inspector.query(`SELECT count(*)::int AS n FROM mission.processed_messages WHERE message_id = $1`, [messageId]);
      expect(rows[0].n).toBe(1);
    });

    it('takes a decision that arrives before the reply that created its item, and ignores that late reply', async () => {
      const tenantId = randomUUID();
      hitReplyDelays.set('Decided early', 1_000);
      const { id } = await submit(tenantId, {
        title: 'Early decision',
        objective: 'Decide before the item is known',
        steps: [
          { type: 'approval', title: 'Decided early' },
          { type: 'brain.query', query: 'after the early decision' },
        ],
      });
      await waitUntil(() => hitItems.has(`${tenantId}:${id}:0`), 'the item to be created');
      const hitId = hitItems.get(`${tenantId}:${id}:0`) ?? '';
      await decide(tenantId, id, hitId, 'approved', randomUUID(), 0);

      const done = await waitForMission(tenantId, id);
      expect(done.status).toBe('succeeded');
      expect(done.steps[0]).toMatchObject({ status: 'succeeded', hitId, output: { hitId, decision: 'approved' } });
      // The item's late reply came after and changed nothing.
      await new Promise((resolve) => setTimeout(resolve, 1_200));
      await expect(get(tenantId, id)).resolves.toMatchObject({ status: 'succeeded' });
    });

    it('ends the mission rejected on rejection and ignores a decision for another item', async () => {
      const tenantId = randomUUID();
      const { id } = await submit(tenantId, {
        title: 'Needs sign-off',
        objective: 'O',
        steps: [
          { type: 'brain.query', query: 'first' },
          { type: 'approval', title: 'Sign off' },
          { type: 'brain.query', query: 'never' },
        ],
      });
      const waiting = await waitForMission(tenantId, id, ['awaiting_approval']);
      await decide(tenantId, id, randomUUID(), 'approved');
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect((await waitForMission(tenantId, id, ['awaiting_approval'])).status).toBe('awaiting_approval');

      await decide(tenantId, id, waiting.steps[1]?.hitId ?? '', 'rejected');
      const done = await waitForMission(tenantId, id);
      expect(done.status).toBe('rejected');
      expect(done.steps.map((step) => step.status)).toEqual(['succeeded', 'failed', 'skipped']);
      expect(brain.calls.filter((call) => call.tenantId === tenantId).map((call) => call.q)).toEqual(['first']);
    });

    it('asks again, after a backoff, for a step the brain could not answer, and then succeeds', async () => {
      const tenantId = randomUUID();
      brain.flakyOnce.add('briefly unavailable');
      const { id } = await submit(tenantId, { title: 'Flaky', objective: 'Survive a hiccup', steps: [{ type: 'brain.query', query: 'briefly unavailable' }] });

      const done = await waitForMission(tenantId, id);

      expect(done.status).toBe('succeeded');
      expect(done.result).toEqual({ steps: [{ results: cannedResults('briefly unavailable') }] });
      expect(brain.calls.filter((call) => call.tenantId === tenantId).map((call) => call.q)).toEqual(['briefly unavailable', 'briefly unavailable']);
      for (const topic of [Topics.missionEvents, Topics.missionStepResults]) expect(broker.deadLetters(topic).filter((message) => message.key === `${tenantId}:${id}`)).toEqual([]);
    });

    it('keeps a mission running while the brain is unavailable, asking again with backoff, and finishes it once the brain is back', async () => {
      const tenantId = randomUUID();
      brain.down.add('during the outage');
      const { id } = await submit(tenantId, {
        title: 'Outage',
        objective: 'Outlast the brain outage',
        steps: [
          { type: 'brain.query', query: 'before the outage' },
          { type: 'brain.query', query: 'during the outage' },
        ],
      });
      const outageCalls = () => brain.calls.filter((call) => call.tenantId === tenantId && call.q === 'during the outage').length;
      await waitUntil(() => outageCalls() >= 4, 'four attempts during the outage');
      const stalled = await get(tenantId, id);
      expect(stalled.status).toBe('running');
      expect(stalled.error).toBeUndefined();
      expect(stalled.steps.map((step) => step.status)).toEqual(['succeeded', 'running']);
      // Backoff, not a busy loop: 50, 100, 200, 200 ms… so a few attempts in a second, not hundreds.
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      expect(outageCalls()).toBeLessThan(15);

      brain.down.delete('during the outage');
      const done = await waitForMission(tenantId, id);
      expect(done.status).toBe('succeeded');
      expect(done.result).toEqual({ steps: [{ results: cannedResults('before the outage') }, { results: cannedResults('during the outage') }] });
      // The finished step is not asked again.
      expect(brain.calls.filter((call) => call.tenantId === tenantId && call.q === 'before the outage')).toHaveLength(1);
    });

    it('fails a step whose dependency stays unavailable after the most attempts, with that error, instead of retrying forever', async () => {
      const tenantId = randomUUID();
      brain.down.add('never back');
      const { id } = await submit(tenantId, {
        title: 'Hopeless',
        objective: 'Outlast nothing',
        steps: [
          { type: 'brain.query', query: 'never back' },
          { type: 'brain.query', query: 'not reached' },
        ],
      });

      const done = await waitForMission(tenantId, id, FINAL_MISSION_STATUSES, 15_000);

      expect(done.status).toBe('failed');
      expect(done.error).toMatchObject({ code: ErrorCode.DependencyUnavailable });
      expect(done.steps.map((step) => step.status)).toEqual(['failed', 'skipped']);
      expect(brain.calls.filter((call) => call.tenantId === tenantId).map((call) => call.q)).toEqual(Array<string>(TIMINGS.maxAttempts).fill('never back'));
    }, 20_000);

    it('sends a step request again when its reply does not come in time, and ignores the late reply to the first one', async () => {
      const tenantId = randomUUID();
      // The first answer comes at 2.5 s, after the reply timeout (1.5 s), while the request sent
      // again then waits for its own (due at about 2.8 s): the late first reply must not be taken for it.
      brain.delays.set('slow answer', [2_500, 1_200]);
      const { id } = await submit(tenantId, { title: 'Late', objective: 'Outwait a lost reply', steps: [{ type: 'brain.query', query: 'slow answer' }] });

      const done = await waitForMission(tenantId, id, FINAL_MISSION_STATUSES, 15_000);

      expect(done.status).toBe('succeeded');
      const calls = brain.calls.filter((call) => call.tenantId === tenantId);
      expect(calls.map((call) => call.q)).toEqual(['slow answer', 'slow answer']);
      const second = brain.calls.indexOf(calls[1]) + 1;
      expect(done.result).toEqual({ steps: [{ results: cannedResults(`slow answer (call ${second})`) }] });
      expect(done.steps.map((step) => step.status)).toEqual(['succeeded']);
    }, 20_000);

    it('finishes a mission whose step was outstanding when mission-service stopped, after a restart', async () => {
      const tenantId = randomUUID();
      brain.down.add('across a restart');
      const { id } = await submit(tenantId, { title: 'Restart', objective: 'Outlast a restart', steps: [{ type: 'brain.query', query: 'across a restart' }] });
      await waitUntil(() => brain.calls.some((call) => call.tenantId === tenantId), 'the first attempt');

      await stopMission();
      brain.down.delete('across a restart');
      mission = await startMission();

      const done = await waitForMission(tenantId, id);
      expect(done.status).toBe('succeeded');
      expect(done.result).toEqual({ steps: [{ results: cannedResults('across a restart') }] });
      await waitUntil(() => mission.logger.entries.some((entry) => entry.message === 'Resumed unfinished missions'), 'the resume log line');
    });

    it('seals a step request while it waits in the outbox: the query is tenant content', async () => {
      const tenantId = randomUUID();
      const canary = `canary ${randomUUID()}`;
      const { id } = await submit(tenantId, { title: 'Sealed', objective: canary });
      await waitForMission(tenantId, id);
      const { rows } = await inspector.query(`SELECT payload::text AS payload, headers FROM mission.outbox WHERE type = $1 AND key = $2`, [
        MessageTypes.brainQuery,
        `${tenantId}:${id}`,
      ]);
      expect(rows).toHaveLength(1);
      expect(rows[0].payload).not.toContain(canary);
      expect(rows[0].payload).toMatch(/^"enc1\./);
      expect(rows[0].headers).toMatchObject({ 'reply-to': Topics.missionStepResults, [TENANT_HEADER]: tenantId });
    });
  });

  describe('tenant isolation', () => {
    it('shows a mission only to its own tenant and answers not_found to any other', async () => {
      const tenantA = randomUUID();
      const tenantB = randomUUID();
      const { id } = await submit(tenantA, { title: 'Private', objective: 'Only for A' });
      await waitForMission(tenantA, id);

      await expect(get(tenantA, id)).resolves.toMatchObject({ id, title: 'Private' });
      const error = await domainErrorOf(get(tenantB, id));
      expect(error.code).toBe(ErrorCode.NotFound);
    });

    it('answers not_found for a malformed or unknown mission id', async () => {
      const tenantId = randomUUID();
      for (const id of ['not-a-uuid', "'; DROP TABLE mission.missions; --", randomUUID()]) {
        const error = await domainErrorOf(get(tenantId, id));
        expect(error.code).toBe(ErrorCode.NotFound);
      }
    });
  });
  describe('housekeeping', () => {
    it('deletes expired idempotency keys of every tenant, and old consumed-message ids and published events, and nothing else', async () => {
      const [tenantA, tenantB] = [randomUUID(), randomUUID()];
      const keys = ['old-a', 'old-b', 'fresh'].map((key) => ({ key, tenant: key === 'old-b' ? tenantB : tenantA, age: key === 'fresh' ? '23 hours' : '25 hours' }));
      for (const { key, tenant, age } of keys) {
        await inspector.query(`INSERT INTO mission.idempotency_keys (tenant_id, key, request_hash, mission_id, created_at) VALUES ($1, $2, 'h', $3, now() - $4::interval)`, [
          tenant,
          key,
          randomUUID(),
          age,
        ]);
      }
      const consumer = `sweep-test-${randomUUID()}`;
      for (const [id, age] of [
        ['old', '15 days'],
        ['recent', '13 days'],
      ]) {
        await inspector.query(`INSERT INTO mission.processed_messages (consumer, message_id, processed_at) VALUES ($1, $2, now() - $3::interval)`, [consumer, id, age]);
      }
      const events = { published: randomUUID(), recent: randomUUID(), unpublished: randomUUID() };
      for (const [id, published] of [
        [events.published, "now() - interval '15 days'"],
        [events.recent, "now() - interval '1 day'"],
        [events.unpublished, 'NULL'],
      ]) {
        await inspector.query(
          `INSERT INTO mission.outbox (id, topic, type, key, payload, created_at, published_at) VALUES ($1, 't', 'x', 'k', '{}', now() - interval '20 days', ${published})`,
          [id],
        );
      }

      // As the service role (row-level security on), outside any tenant, as the timer runs it.
      const serviceDatabase = await openMissionDatabase(database.url);
      try {
        const housekeeper = new Housekeeper(serviceDatabase, [expiredIdempotencyKeysSweep(24), processedMessagesSweep('mission'), publishedOutboxSweep('mission')]);
        const swept = await housekeeper.sweep();
        expect(swept['mission.idempotency_keys']).toBeGreaterThanOrEqual(2);
        expect((await housekeeper.sweep())['mission.idempotency_keys']).toBe(0);
      } finally {
        await serviceDatabase.destroy();
      }
      const left = await inspector.query(`SELECT key FROM mission.idempotency_keys WHERE tenant_id = ANY($1) ORDER BY key`, [[tenantA, tenantB]]);
      expect(left.rows.map((row) => row.key)).toEqual(['fresh']);
      const processed = await inspector.query(`SELECT message_id FROM mission.processed_messages WHERE consumer = $1`, [consumer]);
      expect(processed.rows.map((row) => row.message_id)).toEqual(['recent']);
      const outbox = await inspector.query(`SELECT id FROM mission.outbox WHERE id = ANY($1) ORDER BY id`, [Object.values(events)]);
      expect(outbox.rows.map((row) => row.id).sort()).toEqual([events.recent, events.unpublished].sort());
    });

    it('refuses to delete idempotency keys younger than a day, whatever age it is asked for', async () => {
      const tenantId = randomUUID();
      await inspector.query(
        `INSERT INTO mission.idempotency_keys (tenant_id, key, request_hash, mission_id, created_at) VALUES ($1, 'young', 'h', $2, now() - interval '2 hours')`,
        [tenantId, randomUUID()],
      );
      const serviceDatabase = await openMissionDatabase(database.url);
      try {
        await new Housekeeper(serviceDatabase, [expiredIdempotencyKeysSweep(1)]).sweep();
      } finally {
        await serviceDatabase.destroy();
      }
      expect((await inspector.query(`SELECT count(*)::int AS n FROM mission.idempotency_keys WHERE tenant_id = $1`, [tenantId])).rows[0].n).toBe(1);
    });
  });
});
