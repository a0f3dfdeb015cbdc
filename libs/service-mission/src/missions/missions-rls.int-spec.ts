import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { MissionView } from '@mission/contracts';
import { KeyEncryptionKey, LocalKeyProvider } from '@mission/crypto';
import { createTestDatabase, isPreparationProbe, RecordCipher, sentStatement, TestDatabase, tenantReader, tenantTransaction } from '@mission/persistence';
import { runWithTenant } from '@mission/tenant-context';
import { openMissionDatabase } from '../mission-service';
import { MissionRunner } from './mission-runner';
import { StepRequests } from './mission.steps';
import { MissionsRepository } from './missions.repository';
import { MissionsService } from './missions.service';

const ADMIN_URL = process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

/** Row-level security as the second wall: what the database itself refuses, whatever the code asks. */
describe('mission tables under row-level security', () => {
  let database: TestDatabase;
  let dataSource: DataSource;
  let repository: MissionsRepository;
  let service: MissionsService;
  const tenantA = randomUUID();
  const tenantB = randomUUID();
  let missionA: MissionView;
  let missionB: MissionView;
  const cipher = new RecordCipher('mission', new LocalKeyProvider(KeyEncryptionKey.generate()));

  const count = async (run: (sql: string) => Promise<Array<{ n: number }>>, table: string): Promise<number> =>
    (await run(`SELECT count(*)::int AS n FROM mission.${table}`))[0]?.n ?? -1;

  beforeAll(async () => {
    database = await createTestDatabase(ADMIN_URL, 'mission_rls');
    dataSource = await openMissionDatabase(database.url);
    repository = new MissionsRepository(dataSource, cipher);
    service = new MissionsService(dataSource, repository, () => undefined);
    missionA = await runWithTenant({ tenantId: tenantA }, () =>
      service.submit({ mission: { title: 'A', objective: 'a' }, idempotencyKey: 'key-a', scopes: ['missions:write', 'brain:read'] }),
    );
    missionB = await runWithTenant({ tenantId: tenantB }, () =>
      service.submit({ mission: { title: 'B', objective: 'b' }, idempotencyKey: 'key-b', scopes: ['missions:write', 'brain:read'] }),
    );
  });

  afterAll(async () => {
    await dataSource?.destroy();
    await database?.drop();
  });

  it('runs the service’s queries as a role that neither owns the tables nor bypasses row-level security', async () => {
    const [role] = await dataSource.query(`SELECT current_user AS name, rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user`);
    expect(role).toEqual({ name: 'mission_service', rolsuper: false, rolbypassrls: false });
    const tables = await dataSource.query(
      `SELECT relname, relrowsecurity, relforcerowsecurity FROM pg_class WHERE relnamespace = 'mission'::regnamespace AND relname IN ('missions', 'idempotency_keys') ORDER BY relname`,
    );
    expect(tables).toEqual([
      { relname: 'idempotency_keys', relrowsecurity: true, relforcerowsecurity: true },
      { relname: 'missions', relrowsecurity: true, relforcerowsecurity: true },
    ]);
  });

  it('shows a query without a tenant set zero rows, even through the repository', async () => {
    const plain = (sql: string) => dataSource.query(sql);
    expect(await count(plain, 'missions')).toBe(0);
    expect(await count(plain, 'idempotency_keys')).toBe(0);
    await expect(repository.findForTenant(dataSource.manager, tenantA, missionA.id)).resolves.toBeNull();
    await expect(repository.page(dataSource.manager, tenantA, 10)).resolves.toEqual([]);
  });

  it('never shows tenant A’s transaction a row of tenant B, even when the query forgets the tenant filter', async () => {
    await runWithTenant({ tenantId: tenantA }, () =>
      tenantTransaction(dataSource, async (manager) => {
        const inA = (sql: string) => manager.query(sql);
        expect(await count(inA, 'missions')).toBe(1);
        expect(await count(inA, 'idempotency_keys')).toBe(1);
        const ids = (await manager.query(`SELECT id FROM mission.missions`)).map((row: { id: string }) => row.id);
        expect(ids).toEqual([missionA.id]);
        await expect(repository.findForTenant(manager, tenantB, missionB.id)).resolves.toBeNull();
        const updated = await manager.query(`UPDATE mission.missions SET title = 'stolen' WHERE id = $1`, [missionB.id]);
        expect(updated[1]).toBe(0);
      }),
    );
    await expect(runWithTenant({ tenantId: tenantB }, () => service.get(missionB.id))).resolves.toMatchObject({ title: 'B' });
  });

  it('sets the tenant of a transaction in the message that opens it', async () => {
    const messages = jest.spyOn(Client.prototype, 'query');
    try {
      const seen = await runWithTenant({ tenantId: tenantA }, () =>
        tenantTransaction(dataSource, async (manager) => (await manager.query(`SELECT current_setting('app.tenant_id') AS tenant, count(*)::int AS n FROM mission.missions`))[0]),
      );
      expect(seen).toEqual({ tenant: tenantA, n: 1 });
      const sent = messages.mock.calls
        .map(([statement]) => (typeof statement === 'string' ? statement : String((statement as { text?: string }).text)))
        .filter((message) => !isPreparationProbe(message));
      // Inlined, or the EXECUTE of its prepared form (the statement's text is known to PostgreSQL then).
      expect(sent[0]).toMatch(
        new RegExp(
          `^START TRANSACTION;\\n(SELECT set_config\\('app\\.tenant_id', '${tenantA}', true\\)|(PREPARE mission_\\w+ AS SELECT set_config\\(\\$1, \\$2, true\\);\\n)?EXECUTE mission_\\w+\\('app\\.tenant_id', '${tenantA}'\\))$`,
        ),
      );
      expect(sent.filter((statement) => statement.includes(tenantA))).toHaveLength(1);
    } finally {
      messages.mockRestore();
    }
  });

  it('sends a mission\u2019s state change as two messages: the lock with the opening, the writes with the commit', async () => {
    const change = (): Promise<void> =>
      runWithTenant({ tenantId: tenantA }, () =>
        tenantTransaction(dataSource, async (manager) => {
          const mission = await repository.lockForTenant(manager, tenantA, missionA.id);
          if (!mission) throw new Error('mission A not found');
          mission.updatedAt = new Date();
          await repository.save(manager, mission);
        }),
      );
    // The first change also reads the tenant's data keys, which are cached from then on.
    await change();
    const messages = jest.spyOn(Client.prototype, 'query');
    try {
      await change();
      const sent = messages.mock.calls
        .map(([statement]) => (typeof statement === 'string' ? statement : String((statement as { text?: string }).text)))
        .filter((message) => !isPreparationProbe(message));
      expect(sent).toEqual([
        expect.stringMatching(new RegExp(`^START TRANSACTION;\\n${sentStatement('SELECT set_config\\(')}.*\\n${sentStatement('SELECT ')}.*$`, 's')),
        expect.stringMatching(new RegExp(`^${sentStatement('UPDATE mission\\.missions SET ')}.*;\\nCOMMIT$`, 's')),
      ]);
      // The lock is a FOR UPDATE, inlined or prepared.
      expect(sent[0]).toContain('FOR UPDATE');
    } finally {
      messages.mockRestore();
    }
  });

  describe('tenantReader (a read in one round trip)', () => {
    it('reads under row-level security as the current tenant, even when the query forgets the tenant filter', async () => {
      const reader = tenantReader(dataSource);
      const ids = await runWithTenant({ tenantId: tenantA }, () => reader.query(`SELECT id FROM mission.missions`));
      expect(ids).toEqual([{ id: missionA.id }]);
      await expect(runWithTenant({ tenantId: tenantA }, () => repository.read(reader, tenantB, missionB.id))).resolves.toBeNull();
      await expect(runWithTenant({ tenantId: tenantB }, () => repository.read(reader, tenantB, missionB.id))).resolves.toMatchObject({ id: missionB.id, title: 'B' });
    });

    it('leaves no tenant set on the pooled connection afterwards, and needs a tenant context', async () => {
      const single = await openMissionDatabase(database.url);
      try {
        await runWithTenant({ tenantId: tenantA }, () => tenantReader(single).query(`SELECT 1`));
        const settings = await Promise.all(
          Array.from({ length: 12 }, () => single.query(`SELECT current_setting('app.tenant_id', true) AS tenant, count(*)::int AS n FROM mission.missions`)),
        );
        expect(settings.flat().every((row: { tenant: string | null; n: number }) => !row.tenant && row.n === 0)).toBe(true);
        await expect(tenantReader(single).query(`SELECT 1`)).rejects.toThrow();
      } finally {
        await single.destroy();
      }
    });

    it('keeps each read of a shared message under its own tenant, and one failing read fails alone', async () => {
      const reader = tenantReader(dataSource);
      const readAs = (tenantId: string) => runWithTenant({ tenantId }, () => reader.query(`SELECT id, current_setting('app.tenant_id') AS tenant FROM mission.missions`));
      // Issued at once, so they travel together: A, B, A, a failing statement, B.
      const outcomes = await Promise.allSettled([
        readAs(tenantA),
        readAs(tenantB),
        readAs(tenantA),
        runWithTenant({ tenantId: tenantA }, () => reader.query(`SELECT 1 / 0 AS boom`)),
        readAs(tenantB),
      ]);
      const rowsOf = (index: number) => (outcomes[index] as PromiseFulfilledResult<unknown[]>).value;
      expect(outcomes.map((outcome) => outcome.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled', 'rejected', 'fulfilled']);
      expect(rowsOf(0)).toEqual([{ id: missionA.id, tenant: tenantA }]);
      expect(rowsOf(1)).toEqual([{ id: missionB.id, tenant: tenantB }]);
      expect(rowsOf(2)).toEqual([{ id: missionA.id, tenant: tenantA }]);
      expect((outcomes[3] as PromiseRejectedResult).reason).toMatchObject({ message: expect.stringMatching(/division by zero/) });
      expect(rowsOf(4)).toEqual([{ id: missionB.id, tenant: tenantB }]);
      // More reads than one message takes still each get their own tenant's rows, in three messages (32 at most each).
      const messages = jest.spyOn(Client.prototype, 'query');
      const many = await Promise.all(Array.from({ length: 70 }, (_, index) => readAs(index % 2 ? tenantB : tenantA)));
      expect(messages.mock.calls.filter(([text]) => !isPreparationProbe(String(text)))).toHaveLength(3);
      messages.mockRestore();
      expect(many.every((rows, index) => JSON.stringify(rows) === JSON.stringify([index % 2 ? { id: missionB.id, tenant: tenantB } : { id: missionA.id, tenant: tenantA }]))).toBe(
        true,
      );
    });

    it('reads through prepared statements, batched or not, each under its own tenant', async () => {
      const reader = tenantReader(dataSource);
      const select = `SELECT id FROM mission.missions WHERE id = ANY($1::uuid[])`;
      const both = [missionA.id, missionB.id];
      const messages = jest.spyOn(Client.prototype, 'query');
      try {
        let executed = 0;
        for (let round = 0; executed < 12 && round < 300; round++) {
          messages.mockClear();
          const [a, b, alone] = await Promise.all([
            runWithTenant({ tenantId: tenantA }, () => reader.query(select, [both])),
            runWithTenant({ tenantId: tenantB }, () => reader.query(select, [both])),
            round % 2 ? Promise.resolve(undefined) : runWithTenant({ tenantId: tenantB }, () => reader.query(select, [[missionA.id]])),
          ]);
          expect(a).toEqual([{ id: missionA.id }]);
          expect(b).toEqual([{ id: missionB.id }]);
          if (alone !== undefined) expect(alone).toEqual([]);
          const sent = messages.mock.calls.map(([text]) => String(text)).filter((text) => !isPreparationProbe(text));
          if (sent.some((text) => /EXECUTE mission_\w+\('\{/.test(text))) executed++;
          else await new Promise((resolve) => setTimeout(resolve, 10));
        }
        expect(executed).toBe(12);
      } finally {
        messages.mockRestore();
      }
    });

    it('fails a read whose session the server ends, without an uncaught error, and serves the next one', async () => {
      const reader = tenantReader(dataSource);
      const reading = runWithTenant({ tenantId: tenantA }, () => reader.query(`SELECT pg_sleep(5)::text AS slept, count(*)::int AS n FROM mission.missions`));
      reading.catch(() => undefined);
      const admin = new Client({ connectionString: database.url });
      await admin.connect();
      try {
        for (let waited = 0; ; waited += 20) {
          const { rows } = await admin.query(`SELECT pg_terminate_backend(pid) AS ended FROM pg_stat_activity WHERE query LIKE '%pg_sleep(5)%' AND pid <> pg_backend_pid()`);
          if (rows.length > 0) break;
          if (waited > 10_000) throw new Error('The read never started');
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
      } finally {
        await admin.end();
      }
      await expect(reading).rejects.toThrow(/terminat|Connection|connection/);
      await expect(runWithTenant({ tenantId: tenantA }, () => reader.query(`SELECT count(*)::int AS n FROM mission.missions`))).resolves.toEqual([{ n: 1 }]);
    });

    it('takes one statement: a second one is refused before anything is sent', async () => {
      const reader = tenantReader(dataSource);
      await expect(runWithTenant({ tenantId: tenantA }, () => reader.query(`SELECT 1; SELECT 2`))).rejects.toThrow(/one statement/);
      await expect(runWithTenant({ tenantId: tenantA }, () => reader.query(`SELECT count(*)::int AS n FROM mission.missions;`))).resolves.toEqual([{ n: 1 }]);
    });

    it('inlines parameters as escaped literals: quotes and backslashes are data, a NUL or a missing parameter is refused', async () => {
      const reader = tenantReader(dataSource);
      const tricky = `it's a \\ backslash'); DELETE FROM mission.missions; --`;
      const [row] = await runWithTenant({ tenantId: tenantA }, () => reader.query(`SELECT $1::text AS echoed, $2::int AS n`, [tricky, 7]));
      expect(row).toEqual({ echoed: tricky, n: 7 });
      expect(await runWithTenant({ tenantId: tenantA }, () => reader.query(`SELECT count(*)::int AS n FROM mission.missions`))).toEqual([{ n: 1 }]);
      await expect(runWithTenant({ tenantId: tenantA }, () => reader.query(`SELECT $1::text`, ['a\u0000b']))).rejects.toThrow(/NUL/);
      await expect(runWithTenant({ tenantId: tenantA }, () => reader.query(`SELECT $2::text`, ['only one']))).rejects.toThrow(/No parameter \$2/);
    });
  });

  it('refuses to write a row for another tenant, or a row without a tenant', async () => {
    const insert = (tenantId: string | null) =>
      runWithTenant({ tenantId: tenantA }, () =>
        tenantTransaction(dataSource, (manager) =>
          manager.query(
            `INSERT INTO mission.missions (id, tenant_id, title, objective, steps, status, created_at, updated_at) VALUES ($1, $2, 't', 'o', '[]', 'queued', now(), now())`,
            [randomUUID(), tenantId],
          ),
        ),
      );
    await expect(insert(tenantB)).rejects.toThrow(/row-level security/);
    await expect(insert(null)).rejects.toThrow(/null value|row-level security/);
  });

  it('marks a queued mission of the tenant running, and leaves another tenant’s, a finished or a cancelled mission as it is', async () => {
    const runner = new MissionRunner(dataSource, repository, new StepRequests(cipher), { info: () => undefined, error: () => undefined }, () => undefined);
    const submitA = (title: string): Promise<MissionView> =>
      runWithTenant({ tenantId: tenantA }, () => service.submit({ mission: { title, objective: 'a' }, scopes: ['missions:write', 'brain:read'] }));
    const [queued, cancelled, finished] = [await submitA('Start'), await submitA('Cancelled'), await submitA('Finished')];
    await runWithTenant({ tenantId: tenantA }, () => service.cancel(cancelled.id));
    await runWithTenant({ tenantId: tenantA }, () =>
      tenantTransaction(dataSource, async (manager) => {
        const mission = await repository.lockForTenant(manager, tenantA, finished.id);
        if (!mission) throw new Error('mission not found');
        Object.assign(mission, { status: 'succeeded', completedAt: new Date(), updatedAt: new Date() });
        await repository.save(manager, mission);
      }),
    );
    const read = (tenantId: string, id: string) =>
      runWithTenant({ tenantId }, () => tenantTransaction(dataSource, async (manager) => repository.findForTenant(manager, tenantId, id)));
    const queuedBefore = await read(tenantA, queued.id);
    const before = await Promise.all([read(tenantA, cancelled.id), read(tenantA, finished.id), read(tenantB, missionB.id)]);
    // Tenant B's mission named in tenant A's context is not A's to start; the others moved on.
    await runWithTenant({ tenantId: tenantA }, async () => {
      for (const id of [queued.id, cancelled.id, finished.id, missionB.id]) await runner.markRunning(id);
    });
    // Only its status (and when it changed): its content stays as it was sealed.
    const started = await read(tenantA, queued.id);
    expect(started?.status).toBe('running');
    expect(started?.updatedAt.getTime()).toBeGreaterThanOrEqual(queuedBefore?.updatedAt.getTime() ?? Infinity);
    expect({ ...started, status: 'queued', updatedAt: queuedBefore?.updatedAt }).toEqual({ ...queuedBefore });
    expect(await Promise.all([read(tenantA, cancelled.id), read(tenantA, finished.id), read(tenantB, missionB.id)])).toEqual(before);
    expect(before.map((mission) => mission?.status)).toEqual(['cancelled', 'succeeded', 'queued']);
  });

  it('lets the restart sweep find every tenant’s unfinished missions, as ids and tenants only', async () => {
    const unfinished = await repository.findUnfinished(100);
    expect(unfinished).toEqual(
      expect.arrayContaining([
        { id: missionA.id, tenantId: tenantA },
        { id: missionB.id, tenantId: tenantB },
      ]),
    );
    await expect(dataSource.query(`SELECT * FROM mission.unfinished_missions(10)`)).resolves.toEqual(expect.arrayContaining([{ id: missionA.id, tenant_id: tenantA }]));
  });
});
