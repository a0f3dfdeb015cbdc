import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { ErrorCode, eventIdPosition, Messages, MessageTypes, NotifyEventSchemas, Topics, type PayloadOf, type TenantEvent, type TenantEventPage } from '@mission/contracts';
import { KeyEncryptionKey, LocalKeyProvider } from '@mission/crypto';
import { eventHandlers, InProcessBroker, InProcessBus, requestMessage } from '@mission/messaging';
import { domainErrorOf } from '@mission/messaging/testing';
import { createTestDatabase, RecordCipher, TestDatabase } from '@mission/persistence';
import { optionalTenant, runWithTenant } from '@mission/tenant-context';
import { expiredEventsSweep, openNotificationDatabase, startNotificationService, type NotificationServiceHandle } from '../notification-service';
import { EventLog } from './event-log';

const ADMIN_URL = process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const silent = { info: () => undefined, warn: () => undefined, error: () => undefined };
const ALL_TYPES = ['mission.awaiting_approval', 'mission.completed', 'hit.created', 'hit.decided', 'hit.expired'] as const;

describe('the tenants’ event logs on PostgreSQL', () => {
  let database: TestDatabase;
  let inspector: Client;
  let dataSource: DataSource;
  let log: EventLog;
  const keys = new LocalKeyProvider(KeyEncryptionKey.generate());
  const broker = new InProcessBroker();
  const serviceBus = new InProcessBus(broker);
  const client = new InProcessBus(broker);
  let service: NotificationServiceHandle;
  /** What notify.events.v1 announced, with the tenant each announcement carried. */
  const announced: Array<{ tenantId: string | undefined; event: TenantEvent }> = [];

  const as = <T>(tenantId: string, work: () => Promise<T>): Promise<T> => runWithTenant({ tenantId }, work);
  const list = (tenantId: string, query: Partial<PayloadOf<typeof Messages.eventsList>> = {}): Promise<TenantEventPage> =>
    as(tenantId, () => requestMessage(client, Messages.eventsList, { types: [...ALL_TYPES], ...query }));

  /** Waits until the tenant's log holds `count` events (delivery is asynchronous). */
  async function logged(tenantId: string, count: number): Promise<TenantEventPage> {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const page = await list(tenantId, { limit: 1_000 });
      if (page.items.length >= count || Date.now() > deadline) return page;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  beforeAll(async () => {
    database = await createTestDatabase(ADMIN_URL, 'notify_log');
    service = await startNotificationService({ databaseUrl: database.url, bus: serviceBus, logger: silent, keys });
    client.subscribe(
      Topics.notifyEvents,
      'test-announcements',
      eventHandlers(NotifyEventSchemas, {
        [MessageTypes.tenantEventRecorded]: async (event) => void announced.push({ tenantId: optionalTenant()?.tenantId, event }),
      }),
      { broadcast: true },
    );
    await serviceBus.start();
    await client.start();
    await service.afterBusStart();
    dataSource = await openNotificationDatabase(database.url);
    log = new EventLog(dataSource, new RecordCipher('notify', keys));
    inspector = new Client({ connectionString: database.url });
    await inspector.connect();
  });

  afterAll(async () => {
    await inspector?.end();
    await dataSource?.destroy();
    await client.close();
    await serviceBus.close();
    await service?.stop();
    await database?.drop();
  });

  it('records the services’ events in the order they come, as clients see them, without what people wrote', async () => {
    const tenant = randomUUID();
    const missionId = randomUUID();
    const hitId = randomUUID();
    const key = `${tenant}:${missionId}`;
    await as(tenant, async () => {
      await client.publish(Topics.hitEvents, { type: MessageTypes.hitCreated, key, payload: { hitId, missionId, stepIndex: 1, createdAt: '2026-11-26T10:00:00.000Z' } });
      await client.publish(Topics.missionEvents, {
        type: MessageTypes.missionAwaitingApproval,
        key,
        payload: { missionId, hitId, stepIndex: 1, at: '2026-11-26T10:00:00.100Z' },
      });
      await client.publish(Topics.hitEvents, {
        type: MessageTypes.hitDecided,
        key,
        payload: { hitId, missionId, stepIndex: 1, decision: 'approved', decidedBy: 'ada', decidedAt: '2026-11-26T10:01:00.000Z', comment: 'private reasoning' },
      });
      // Events the log does not keep: a queued mission is not news to the client that queued it.
      await client.publish(Topics.missionEvents, { type: MessageTypes.missionQueued, key, payload: { missionId } });
    });
    // Events of one topic and key arrive in order; the two topics are merged as they come.
    const page = await logged(tenant, 3);
    expect(page.items).toHaveLength(3);
    expect(page.items.map((event) => eventIdPosition(event.id))).toEqual(['1', '2', '3']);
    expect(page.items.map((event) => event.type).sort()).toEqual(['hit.created', 'hit.decided', 'mission.awaiting_approval']);
    expect(page.items.find((event) => event.type === 'hit.decided')).toEqual({
      id: expect.stringMatching(/^evt_\d+_[0-9a-f]{12}$/),
      type: 'hit.decided',
      timestamp: '2026-11-26T10:01:00.000Z',
      data: { hitId, missionId, decision: 'approved', decidedBy: 'ada' },
    });
    expect(page.items.find((event) => event.type === 'mission.awaiting_approval')?.data).toEqual({ missionId, hitId, stepIndex: 1 });
    expect(page.latest).toBe(page.items[2]?.id);
    await as(tenant, () =>
      client.publish(Topics.missionEvents, { type: MessageTypes.missionCompleted, key, payload: { missionId, status: 'succeeded', completedAt: '2026-11-26T10:01:01.000Z' } }),
    );
    const after = await logged(tenant, 4);
    expect(after.items[3]).toMatchObject({ type: 'mission.completed', data: { missionId, status: 'succeeded' } });
    // Each recorded event is announced once, in the log's order, under its tenant.
    const deadline = Date.now() + 10_000;
    while (announced.filter((a) => a.tenantId === tenant).length < 4 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(announced.filter((a) => a.tenantId === tenant).map((a) => a.event)).toEqual(after.items);
  });

  it('keeps the data sealed at rest and every row of a tenant out of another’s reach', async () => {
    const tenant = randomUUID();
    const other = randomUUID();
    await as(tenant, () => log.record(randomUUID(), { type: 'mission.completed', missionId: randomUUID(), occurredAt: new Date().toISOString(), data: { status: 'failed' } }));
    const { rows } = await inspector.query(`SELECT data FROM notify.events WHERE tenant_id = $1`, [tenant]);
    expect(rows).toHaveLength(1);
    expect(rows[0].data).toMatch(/^enc1\./);
    expect((await list(other)).items).toEqual([]);
    expect((await list(other)).latest).toBeNull();
    // Without a tenant, the service's role sees nothing at all.
    const [count] = await dataSource.query(`SELECT count(*)::int AS n FROM notify.events`);
    expect(count.n).toBe(0);
  });

  it('records a redelivered event once, and numbers events written at once 1…n with no gap', async () => {
    const tenant = randomUUID();
    const source = randomUUID();
    const event = { type: 'mission.completed' as const, missionId: randomUUID(), occurredAt: new Date().toISOString(), data: { status: 'succeeded' } };
    const [first, again] = await Promise.all([as(tenant, () => log.record(source, event)), as(tenant, () => log.record(source, event))]);
    expect([first, again].filter((recorded) => recorded !== undefined)).toHaveLength(1);
    // Redelivered once the first has committed: found before a position is taken.
    await expect(as(tenant, () => log.record(source, event))).resolves.toBeUndefined();
    await Promise.all(Array.from({ length: 40 }, () => as(tenant, () => log.record(randomUUID(), event))));
    const page = await list(tenant, { limit: 1_000 });
    expect(page.items.map((item) => Number(eventIdPosition(item.id)))).toEqual(Array.from({ length: 41 }, (_, index) => index + 1));
  });

  /** An event of `type` about a new mission, numbered `n` in its data. */
  const eventNumbered = (n: number, type: 'mission.completed' | 'hit.created' = 'mission.completed') => ({
    type,
    missionId: randomUUID(),
    occurredAt: new Date().toISOString(),
    data: { n },
  });

  /** The tenant's rows as stored: position, source message, and the transaction that wrote each. */
  async function storedRows(tenant: string): Promise<Array<{ position: number; source: string; xmin: string }>> {
    const { rows } = await inspector.query(
      `SELECT position::int AS position, source_message_id AS source, xmin::text AS xmin FROM notify.events WHERE tenant_id = $1 ORDER BY position`,
      [tenant],
    );
    return rows;
  }

  /**
   * Runs `work` while another session's open transaction holds a copy of message `source` in the
   * tenant's log (position 1,000,000, not committed): this log's check does not see it, and its
   * insert of that message waits for the other's commit. `commitOnceWaited` waits until a statement
   * waits for that transaction's lock, then commits it.
   */
  async function withCopyHeldElsewhere(tenant: string, source: string, work: (commitOnceWaited: () => Promise<void>) => Promise<void>): Promise<void> {
    const other = new Client({ connectionString: database.url });
    await other.connect();
    try {
      await other.query('BEGIN');
      await other.query(
        `INSERT INTO notify.events (tenant_id, position, nonce, type, mission_id, data, occurred_at, recorded_at, source_message_id)
         VALUES ($1, 1000000, 'aaaaaaaaaaaa', 'mission.completed', $2, 'elsewhere', now(), now(), $3)`,
        [tenant, randomUUID(), source],
      );
      await work(async () => {
        const deadline = Date.now() + 10_000;
        for (;;) {
          const { rows } = await inspector.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`);
          if (rows[0].n > 0) break;
          if (Date.now() > deadline) throw new Error('The recording never waited for the other transaction');
          await new Promise((resolve) => setTimeout(resolve, 10));
        }
        await other.query('COMMIT');
      });
    } finally {
      await other.query('ROLLBACK').catch(() => undefined);
      await other.end();
    }
  }

  it('records the events that come while a recording of their tenant runs in one transaction, numbered 1…n, each once', async () => {
    const tenant = randomUUID();
    const before = randomUUID();
    await as(tenant, () => log.record(before, eventNumbered(0)));
    const sources = Array.from({ length: 60 }, () => randomUUID());
    const copied = sources[5] as string;
    // All at once, as a busy consumer delivers them: one copy delivered twice, one recorded before.
    const calls = [...sources, copied, before].map((source, index) =>
      as(tenant, () => log.record(source, eventNumbered(index + 1, index % 2 === 0 ? 'mission.completed' : 'hit.created'))),
    );
    const results = await Promise.all(calls);
    const [recordedOnce, ...rest] = [results.slice(0, 60), results[60], results[61]];
    expect(recordedOnce.every((event) => event !== undefined)).toBe(true);
    expect(rest).toEqual([undefined, undefined]);
    const rows = await storedRows(tenant);
    expect(rows.map((row) => row.position)).toEqual(Array.from({ length: 61 }, (_, index) => index + 1));
    expect(rows.slice(1).map((row) => row.source)).toEqual(sources);
    // They waited for the recording under way (the first one's, or the one before's) and went together.
    expect(new Set(rows.slice(1).map((row) => row.xmin)).size).toBeLessThanOrEqual(2);
    // Each caller has its own event, as readers see it.
    const page = await list(tenant, { limit: 1_000 });
    expect(page.items.slice(1)).toEqual(recordedOnce);
  });

  it('records each event of a batch alone when the batch fails: one event’s failure is its own', async () => {
    const tenant = randomUUID();
    const sources = Array.from({ length: 4 }, () => randomUUID());
    const broken = { ...eventNumbered(2), occurredAt: 'not a time' };
    const outcomes = await Promise.allSettled(sources.map((source, index) => as(tenant, () => log.record(source, index === 2 ? broken : eventNumbered(index)))));
    expect(outcomes.map((outcome) => outcome.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled']);
    const rows = await storedRows(tenant);
    expect(rows.map((row) => [row.position, row.source])).toEqual([
      [1, sources[0]],
      [2, sources[1]],
      [3, sources[3]],
    ]);
  });

  it('records a batch holding a message another process records meanwhile without that message, and without a gap', async () => {
    const tenant = randomUUID();
    const sources = Array.from({ length: 5 }, () => randomUUID());
    const raced = sources[2] as string;
    // Another process's transaction records the third message and has not committed yet.
    await withCopyHeldElsewhere(tenant, raced, async (commitOnceWaited) => {
      const first = randomUUID();
      const calls = [first, ...sources].map((source, index) => as(tenant, () => log.record(source, eventNumbered(index))));
      await commitOnceWaited();
      const results = await Promise.all(calls);
      expect(results.map((result) => result === undefined)).toEqual([false, false, false, true, false, false]);
      const rows = await storedRows(tenant);
      expect(rows.map((row) => [row.position, row.source])).toEqual([
        [1, first],
        [2, sources[0]],
        [3, sources[1]],
        [4, sources[3]],
        [5, sources[4]],
        [1000000, raced],
      ]);
    });
  });

  it('answers a lone event another process records meanwhile as a redelivery, and leaves no gap', async () => {
    const tenant = randomUUID();
    const raced = randomUUID();
    await withCopyHeldElsewhere(tenant, raced, async (commitOnceWaited) => {
      const call = as(tenant, () => log.record(raced, eventNumbered(0)));
      await commitOnceWaited();
      await expect(call).resolves.toBeUndefined();
      // Its position was given back with its transaction: the next event takes 1.
      const next = randomUUID();
      await as(tenant, () => log.record(next, eventNumbered(1)));
      expect((await storedRows(tenant)).map((row) => [row.position, row.source])).toEqual([
        [1, next],
        [1000000, raced],
      ]);
    });
  });

  it('resumes after an event with every later one, filters by type and mission, and refuses positions it never issued', async () => {
    const tenant = randomUUID();
    const [missionA, missionB] = [randomUUID(), randomUUID()];
    for (let index = 0; index < 6; index++) {
      await as(tenant, () =>
        log.record(randomUUID(), {
          type: index % 2 === 0 ? 'hit.created' : 'mission.completed',
          missionId: index < 3 ? missionA : missionB,
          occurredAt: new Date().toISOString(),
          data: { n: index },
        }),
      );
    }
    const all = await list(tenant);
    expect(all.items.map((item) => item.data.n)).toEqual([0, 1, 2, 3, 4, 5]);
    const third = all.items[2]?.id as string;
    expect((await list(tenant, { after: third })).items.map((item) => item.data.n)).toEqual([3, 4, 5]);
    expect((await list(tenant, { after: third, limit: 2 })).items.map((item) => item.data.n)).toEqual([3, 4]);
    expect((await list(tenant, { after: all.latest as string })).items).toEqual([]);
    expect((await list(tenant, { types: ['mission.completed'] })).items.map((item) => item.data.n)).toEqual([1, 3, 5]);
    expect((await list(tenant, { missionId: missionB, types: ['hit.created'] })).items.map((item) => item.data.n)).toEqual([4]);

    const position = eventIdPosition(third) as string;
    const refused = [
      third.replace(/_[0-9a-f]{12}$/, '_000000000000'), // a real position, another event's id
      `evt_99_${'a'.repeat(12)}`, // beyond the log
      'evt_0_000000000000',
      'not-an-id',
      all.items[2]?.id.replace(`evt_${position}_`, 'evt_1_') as string,
    ];
    for (const after of refused) {
      const error = await domainErrorOf(list(tenant, { after }));
      expect({ after, code: error.code }).toEqual({ after, code: ErrorCode.CursorExpired });
    }
    // Another tenant's id names nothing in this log.
    const foreign = await list(randomUUID(), {});
    expect(foreign.items).toEqual([]);
    expect((await domainErrorOf(list(randomUUID(), { after: third }))).code).toBe(ErrorCode.CursorExpired);
  });

  it('forgets events past the retention oldest first, and refuses to resume across what it forgot', async () => {
    const tenant = randomUUID();
    for (let index = 0; index < 5; index++) {
      await as(tenant, () => log.record(randomUUID(), { type: 'hit.decided', missionId: randomUUID(), occurredAt: new Date().toISOString(), data: { n: index } }));
    }
    const before = await list(tenant);
    await inspector.query(`UPDATE notify.events SET recorded_at = now() - interval '9 days' WHERE tenant_id = $1 AND position <= 3`, [tenant]);
    expect(await expiredEventsSweep().run(dataSource)).toBeGreaterThanOrEqual(3);
    const kept = await list(tenant);
    expect(kept.items.map((item) => item.data.n)).toEqual([3, 4]);
    // After the third: the fourth is the oldest kept, so nothing is missing.
    expect((await list(tenant, { after: before.items[2]?.id })).items.map((item) => item.data.n)).toEqual([3, 4]);
    // After the second: the third is gone, so the reader would miss it.
    expect((await domainErrorOf(list(tenant, { after: before.items[1]?.id }))).code).toBe(ErrorCode.CursorExpired);
    // Positions go on from the last one, never reused.
    await as(tenant, () => log.record(randomUUID(), { type: 'hit.decided', missionId: randomUUID(), occurredAt: new Date().toISOString(), data: { n: 5 } }));
    expect(eventIdPosition((await list(tenant)).items.at(-1)?.id as string)).toBe('6');
  });

  it('refuses a page request that names no type, or one it does not know', async () => {
    const tenant = randomUUID();
    expect((await domainErrorOf(list(tenant, { types: [] }))).code).toBe(ErrorCode.ValidationFailed);
    await expect(as(tenant, () => client.request(Topics.notifyRequests, MessageTypes.eventsList, { types: ['mission.queued'] }))).rejects.toMatchObject({
      code: ErrorCode.ValidationFailed,
    });
  });
});
