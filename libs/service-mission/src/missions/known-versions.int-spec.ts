import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import type { DataSource } from 'typeorm';
import { MessageTypes, type MissionView } from '@mission/contracts';
import { KeyEncryptionKey, LocalKeyProvider } from '@mission/crypto';
import { Headers, type IncomingMessage } from '@mission/messaging';
import { createTestDatabase, RecordCipher, tenantTransaction, type TestDatabase } from '@mission/persistence';
import { runWithTenant } from '@mission/tenant-context';
import { openMissionDatabase } from '../mission-service';
import { MISSION_SCHEMA } from './mission.entity';
import { MissionRunner } from './mission-runner';
import { StepRequests } from './mission.steps';
import { isStaleVersion, MissionsRepository } from './missions.repository';
import { MissionsService } from './missions.service';

const ADMIN_URL = process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const KEYS = new LocalKeyProvider(KeyEncryptionKey.generate());
const SCOPES = ['missions:read', 'missions:write', 'brain:read'];
const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };

/** One process's mission service: its repository (with its own known versions), API and runner. */
interface Replica {
  readonly repository: MissionsRepository;
  readonly missions: MissionsService;
  readonly runner: MissionRunner;
}

/**
 * A transition worked out from the version of a mission the process wrote or read last is saved
 * only if the row still holds that version; otherwise it is worked out again on the locked row.
 * Two replicas share one database here, each with its own memory, as two mission-service pods do.
 */
describe('transitions from the known version of a mission', () => {
  let database: TestDatabase;
  let dataSource: DataSource;
  let inspector: Client;
  const tenantId = randomUUID();

  function replica(options: { readonly maxBytes?: number } = {}): Replica {
    const cipher = new RecordCipher(MISSION_SCHEMA, KEYS);
    const repository = new MissionsRepository(dataSource, cipher, options);
    const steps = new StepRequests(cipher);
    return {
      repository,
      missions: new MissionsService(dataSource, repository, () => undefined, steps),
      runner: new MissionRunner(dataSource, repository, steps, quiet, () => undefined),
    };
  }

  const asTenant = <T>(work: () => Promise<T>): Promise<T> => runWithTenant({ tenantId }, work);

  /** A one-step mission (a Brain query, sent with the submit), marked running as mission.queued does. */
  async function submitted(on: Replica): Promise<MissionView> {
    const view = await asTenant(() => on.missions.submit({ mission: { title: 'T', objective: 'find it' }, scopes: SCOPES }));
    await asTenant(() => on.runner.markRunning(view.id));
    return view;
  }

  /** The correlation id of the mission's latest step request. */
  async function requestIdOf(missionId: string): Promise<string> {
    const { rows } = await inspector.query(`SELECT headers->>$2 AS id FROM mission.outbox WHERE key = $1 AND type = $3 ORDER BY created_at DESC LIMIT 1`, [
      `${tenantId}:${missionId}`,
      Headers.correlationId,
      MessageTypes.brainQuery,
    ]);
    return rows[0].id;
  }

  /** brain-service's reply to that request, as the bus hands it to the runner. */
  function reply(on: Replica, missionId: string, requestId: string): Promise<void> {
    const message: IncomingMessage = {
      id: randomUUID(),
      topic: 'mission.step-results.v1',
      type: 'reply',
      key: `${tenantId}:${missionId}`,
      payload: { ok: true, data: { query: 'find it', results: [] } },
      headers: { [Headers.correlationId]: requestId },
      attempt: 1,
    };
    return asTenant(() => on.runner.onStepResult(message));
  }

  async function statusOf(missionId: string): Promise<string> {
    return (await inspector.query(`SELECT status FROM mission.missions WHERE id = $1`, [missionId])).rows[0].status;
  }

  /** mission.completed events written for the mission. */
  async function completions(missionId: string): Promise<number> {
    const { rows } = await inspector.query(`SELECT count(*)::int AS n FROM mission.outbox WHERE key = $1 AND type = $2`, [
      `${tenantId}:${missionId}`,
      MessageTypes.missionCompleted,
    ]);
    return rows[0].n;
  }

  beforeAll(async () => {
    database = await createTestDatabase(ADMIN_URL, 'mission_known_versions_test');
    dataSource = await openMissionDatabase(database.url);
    inspector = new Client({ connectionString: database.url });
    await inspector.connect();
  });

  afterAll(async () => {
    await inspector?.end();
    await dataSource?.destroy();
    await database?.drop();
  });

  afterEach(() => jest.restoreAllMocks());

  it('applies a step result from the version the process wrote, marked running since, without reading the row first', async () => {
    const one = replica();
    const { id } = await submitted(one);
    const locks = jest.spyOn(one.repository, 'lockForTenant');
    await reply(one, id, await requestIdOf(id));
    expect(await statusOf(id)).toBe('succeeded');
    expect(locks).not.toHaveBeenCalled();
    expect(await completions(id)).toBe(1);
    // A final mission is not kept: nothing moves it again.
    expect(one.repository.knownVersion(tenantId, id)).toBeUndefined();
    // The same reply again (a redelivery): decided on the locked row, and stale there.
    await reply(one, id, await requestIdOf(id));
    expect(locks).toHaveBeenCalledTimes(1);
    expect(await completions(id)).toBe(1);
  });

  it('decides again on the locked row when another replica changed the mission meanwhile, and keeps nothing of the first try', async () => {
    const one = replica();
    const other = replica();
    const { id } = await submitted(one);
    const requestId = await requestIdOf(id);
    // The other replica cancels it: this one's known version is now stale.
    await asTenant(() => other.missions.cancel(id));
    const outboxBefore = (await inspector.query(`SELECT count(*)::int AS n FROM mission.outbox`)).rows[0].n;
    const locks = jest.spyOn(one.repository, 'lockForTenant');
    await reply(one, id, requestId);
    expect(locks).toHaveBeenCalledTimes(1);
    expect(await statusOf(id)).toBe('cancelled');
    // The cancel's completion only: the try from the stale version wrote nothing.
    expect(await completions(id)).toBe(1);
    expect((await inspector.query(`SELECT count(*)::int AS n FROM mission.outbox`)).rows[0].n).toBe(outboxBefore);
  });

  it('applies a reply that the known version would call stale when the row says otherwise', async () => {
    const one = replica();
    const other = replica();
    const { id } = await submitted(one);
    // The other replica sends the step's request again (as its overdue check does): a new request id.
    await asTenant(() =>
      tenantTransaction(dataSource, async (manager) => {
        const mission = await other.repository.lockForTenant(manager, tenantId, id);
        const step = mission?.steps[0];
        if (!mission || !step) throw new Error('no mission');
        await new StepRequests(new RecordCipher(MISSION_SCHEMA, KEYS)).send(manager, mission, step, new Date());
        mission.updatedAt = new Date();
        await other.repository.save(manager, mission);
      }),
    );
    const locks = jest.spyOn(one.repository, 'lockForTenant');
    await reply(one, id, await requestIdOf(id));
    expect(locks).toHaveBeenCalledTimes(1);
    expect(await statusOf(id)).toBe('succeeded');
    expect(await completions(id)).toBe(1);
  });

  it('never trusts a version written by a transaction that rolled back', async () => {
    const one = replica();
    const { id } = await submitted(one);
    const requestId = await requestIdOf(id);
    await expect(
      asTenant(() =>
        tenantTransaction(dataSource, async (manager) => {
          const mission = await one.repository.lockForTenant(manager, tenantId, id);
          if (!mission) throw new Error('no mission');
          mission.title = 'Never committed';
          await one.repository.save(manager, mission);
          throw new Error('rolled back');
        }),
      ),
    ).rejects.toThrow('rolled back');
    const locks = jest.spyOn(one.repository, 'lockForTenant');
    await reply(one, id, requestId);
    expect(locks).toHaveBeenCalledTimes(1);
    expect(await statusOf(id)).toBe('succeeded');
    const view = await asTenant(() => one.missions.get(id));
    expect(view.title).toBe('T');
  });

  it("the save's check fails through the service role with its own code, and the transaction with it", async () => {
    const one = replica();
    const { id } = await submitted(one);
    const version = one.repository.knownVersion(tenantId, id);
    if (!version) throw new Error('no known version');
    const error = await asTenant(() =>
      tenantTransaction(dataSource, async (manager) => {
        const mission = await one.repository.openVersion(manager, version);
        mission.title = 'Changed twice';
        // A version that never was: the row holds another.
        await one.repository.saveIfUnchanged(manager, mission, { row: { ...version.row, sealed: `${version.row.sealed}x` } });
      }),
    ).catch((caught: unknown) => caught);
    expect(isStaleVersion(error)).toBe(true);
    expect((await asTenant(() => one.missions.get(id))).title).toBe('T');
  });

  it('applies one of two replies handled at once by two replicas, and announces the mission once', async () => {
    const one = replica();
    const other = replica();
    const { id } = await submitted(one);
    // The other replica knows the same version (it read the mission).
    await asTenant(() => other.missions.get(id));
    expect(other.repository.knownVersion(tenantId, id)?.row.sealed).toBe(one.repository.knownVersion(tenantId, id)?.row.sealed);
    const requestId = await requestIdOf(id);
    await Promise.all([reply(one, id, requestId), reply(other, id, requestId)]);
    expect(await statusOf(id)).toBe('succeeded');
    expect(await completions(id)).toBe(1);
  });

  it("cannot save another tenant's mission from a version it was given", async () => {
    const one = replica();
    const { id } = await submitted(one);
    const version = one.repository.knownVersion(tenantId, id);
    if (!version) throw new Error('no known version');
    const mission = await asTenant(() => tenantTransaction(dataSource, (manager) => one.repository.openVersion(manager, version)));
    mission.title = 'Written by another tenant';
    const error = await runWithTenant({ tenantId: randomUUID() }, () =>
      tenantTransaction(dataSource, (manager) => one.repository.saveIfUnchanged(manager, mission, version)),
    ).catch((caught: unknown) => caught);
    // Row-level security hides the row: no row matched, and nothing was written.
    expect(isStaleVersion(error)).toBe(true);
    expect((await asTenant(() => one.missions.get(id))).title).toBe('T');
  });

  it('keeps versions per tenant, and none when turned off', async () => {
    const one = replica();
    const { id } = await submitted(one);
    // As submitted: markRunning changes the status only, which does not make another version.
    expect(one.repository.knownVersion(tenantId, id)?.row.status).toBe('queued');
    expect(await statusOf(id)).toBe('running');
    expect(one.repository.knownVersion(randomUUID(), id)).toBeUndefined();

    const off = replica({ maxBytes: 0 });
    const second = await submitted(off);
    expect(off.repository.knownVersion(tenantId, second.id)).toBeUndefined();
    const locks = jest.spyOn(off.repository, 'lockForTenant');
    await reply(off, second.id, await requestIdOf(second.id));
    expect(locks).toHaveBeenCalledTimes(1);
    expect(await statusOf(second.id)).toBe('succeeded');
    expect(() => replica({ maxBytes: -1 })).toThrow(RangeError);
  });
});
