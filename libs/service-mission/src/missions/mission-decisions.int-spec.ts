import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { BrainQueryResult, FINAL_MISSION_STATUSES, MessageTypes, MissionStatus, MissionView, Topics } from '@mission/contracts';
import { InProcessBroker, InProcessBus } from '@mission/messaging';
import { KeyEncryptionKey, LocalKeyProvider } from '@mission/crypto';
import { createTestDatabase, TestDatabase } from '@mission/persistence';
import { currentTenant, runWithTenant } from '@mission/tenant-context';
import { MissionServiceHandle, startMissionService } from '../mission-service';

const ADMIN_URL = process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };

/**
 * A decision on an approval item counts only while its mission waits for it: one that arrives
 * after the mission was cancelled (approve and cancel crossing each other), or that finds the
 * mission final whatever its steps say, changes nothing. Against PostgreSQL, through the bus.
 */
describe('decisions for a mission that no longer waits for them', () => {
  let database: TestDatabase;
  let inspector: Client;
  let service: MissionServiceHandle;
  const broker = new InProcessBroker();
  const peers = new InProcessBus(broker, { logger: quiet });
  const client = new InProcessBus(broker, { logger: quiet });
  const missionBus = new InProcessBus(broker, { retry: { attempts: 3, initialBackoffMs: 20, maxBackoffMs: 50 }, logger: quiet });
  /** Every Brain query asked, by mission key: a revived mission asks for its later steps. */
  const brainQueries: Array<{ key: string; q: string }> = [];
  const hitItems = new Map<string, string>();

  const request = <T>(tenantId: string, type: string, payload: unknown): Promise<T> => runWithTenant({ tenantId }, () => client.request<T>(Topics.missionRequests, type, payload));

  async function waitFor(tenantId: string, id: string, statuses: readonly MissionStatus[]): Promise<MissionView> {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const view = await request<MissionView>(tenantId, MessageTypes.missionGet, { id });
      if (statuses.includes(view.status)) return view;
      if (FINAL_MISSION_STATUSES.includes(view.status) || Date.now() > deadline) throw new Error(`mission ${id} is ${view.status}, expected ${statuses.join(' or ')}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  /** A mission parked on its approval step (the second of three), with its item's id. */
  async function waiting(tenantId: string): Promise<{ id: string; hitId: string }> {
    const submitted = await request<MissionView>(tenantId, MessageTypes.missionSubmit, {
      mission: {
        title: 'Sign-off',
        objective: 'O',
        steps: [
          { type: 'brain.query', query: 'before' },
          { type: 'approval', title: 'Go?' },
          { type: 'brain.query', query: 'after' },
        ],
      },
      scopes: ['missions:write', 'brain:read'],
    });
    const parked = await waitFor(tenantId, submitted.id, ['awaiting_approval']);
    expect(parked.steps.map((step) => step.status)).toEqual(['succeeded', 'running', 'pending']);
    return { id: submitted.id, hitId: parked.steps[1]?.hitId ?? '' };
  }

  /** Delivers hit-service's `hit.decided` and waits until mission-service has consumed it. */
  async function decide(tenantId: string, missionId: string, hitId: string, decision: 'approved' | 'rejected'): Promise<void> {
    const messageId = randomUUID();
    await runWithTenant({ tenantId }, () =>
      client.publish(Topics.hitEvents, {
        id: messageId,
        type: MessageTypes.hitDecided,
        key: `${tenantId}:${missionId}`,
        payload: { hitId, missionId, stepIndex: 1, decision, decidedBy: 'reviewer', decidedAt: new Date().toISOString() },
      }),
    );
    const deadline = Date.now() + 10_000;
    while ((await inspector.query(`SELECT 1 FROM mission.processed_messages WHERE message_id = $1`, [messageId])).rowCount === 0) {
      if (Date.now() > deadline) throw new Error('mission-service did not consume the decision');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  async function completions(missionId: string): Promise<string[]> {
    const { rows } = await inspector.query(`SELECT payload->>'status' AS status FROM mission.outbox WHERE type = $1 AND payload->>'missionId' = $2`, [
      MessageTypes.missionCompleted,
      missionId,
    ]);
    return rows.map((row: { status: string }) => row.status);
  }

  beforeAll(async () => {
    database = await createTestDatabase(ADMIN_URL, 'mission_decisions_test');
    inspector = new Client({ connectionString: database.url });
    await inspector.connect();
    peers.serve(Topics.brainRequests, 'brain-service', {
      [MessageTypes.brainQuery]: async (message): Promise<BrainQueryResult> => {
        const { q } = message.payload as { q: string };
        brainQueries.push({ key: message.key, q });
        return { query: q, results: [] };
      },
    });
    peers.serve(Topics.hitRequests, 'hit-service', {
      [MessageTypes.hitCreate]: async (message) => {
        const { missionId, stepIndex, title } = message.payload as { missionId: string; stepIndex: number; title: string };
        // One item per (mission, step), as hit-service keeps it.
        const key = `${currentTenant().tenantId}:${missionId}:${stepIndex}`;
        const id = hitItems.get(key) ?? randomUUID();
        hitItems.set(key, id);
        return { id, missionId, title, status: 'pending', createdAt: new Date().toISOString() };
      },
    });
    await peers.start();
    await client.start();
    service = await startMissionService({ databaseUrl: database.url, bus: missionBus, logger: quiet, keys: new LocalKeyProvider(KeyEncryptionKey.generate()) });
    await missionBus.start();
    await service.afterBusStart();
  });

  afterAll(async () => {
    await missionBus.close();
    await service?.stop();
    await client.close();
    await peers.close();
    await inspector?.end();
    await database?.drop();
  });

  it.each(['approved', 'rejected'] as const)('leaves a cancelled mission cancelled when the item is %s after the cancel', async (decision) => {
    const tenantId = randomUUID();
    const { id, hitId } = await waiting(tenantId);
    const cancelled = await request<MissionView>(tenantId, MessageTypes.missionCancel, { id });
    expect(cancelled.status).toBe('cancelled');

    await decide(tenantId, id, hitId, decision);

    const after = await request<MissionView>(tenantId, MessageTypes.missionGet, { id });
    expect(after).toEqual(cancelled);
    expect(after.steps.map((step) => step.status)).toEqual(['succeeded', 'skipped', 'skipped']);
    expect(brainQueries.filter((query) => query.key === `${tenantId}:${id}`).map((query) => query.q)).toEqual(['before']);
    expect(await completions(id)).toEqual(['cancelled']);
  });

  it.each(['approved', 'rejected'] as const)('ignores an item %s for a mission already final, even with its approval step still running', async (decision) => {
    // A mission made final by another writer than cancel (or by an earlier version) while its
    // approval step still reads `running`: only the mission's own status can stop the decision.
    const tenantId = randomUUID();
    const { id, hitId } = await waiting(tenantId);
    await inspector.query(`UPDATE mission.missions SET status = 'cancelled', completed_at = now() WHERE id = $1`, [id]);
    const before = await request<MissionView>(tenantId, MessageTypes.missionGet, { id });
    expect(before.steps.map((step) => step.status)).toEqual(['succeeded', 'running', 'pending']);

    await decide(tenantId, id, hitId, decision);

    expect(await request<MissionView>(tenantId, MessageTypes.missionGet, { id })).toEqual(before);
    expect(brainQueries.filter((query) => query.key === `${tenantId}:${id}`).map((query) => query.q)).toEqual(['before']);
    expect(await completions(id)).toEqual([]);
  });
});
