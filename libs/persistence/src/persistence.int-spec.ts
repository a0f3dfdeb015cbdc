import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { Client } from 'pg';
import { Column, DataSource, Entity, EntityManager, MigrationInterface, PrimaryColumn, QueryFailedError, QueryRunner } from 'typeorm';
import { InProcessBroker, InProcessBus, IncomingMessage, isDependencyUnavailable } from '@mission/messaging';
import { currentTenant, MissingTenantContextError, runWithTenant, TENANT_HEADER } from '@mission/tenant-context';
import { KeyEncryptionKey, LocalKeyProvider } from '@mission/crypto';
import { dataKeysTableSql, RecordCipher } from './data-keys';
import { openServiceDatabase, tenantTransaction } from './database';
import { deferWrite, queryAndCommit, queryInOneTrip } from './transaction-pipeline';
import { enqueueOutbox, OutboxEvent, OutboxPublisher, OutboxRelay, OutboxRelayOptions, outboxTableSql } from './outbox';
import { markProcessed, processedMessagesTableSql } from './processed-messages';
import { createTestDatabase, isPreparationProbe, sentStatement, TestDatabase } from './test-database';

const ADMIN_URL = process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const SCHEMA = 'persistence_it';
const RACE_SCHEMA = 'persistence_race';

/** How often each fixture migration's `up` ran in this process. */
const migrationRuns: Record<string, number> = {};

function fixtureMigration(schema: string): new () => MigrationInterface {
  return class CreateFixture1700000000000 implements MigrationInterface {
    name = 'CreateFixture1700000000000';

    async up(queryRunner: QueryRunner): Promise<void> {
      migrationRuns[schema] = (migrationRuns[schema] ?? 0) + 1;
      // Holds the migration open long enough that replicas opening together would overlap in it.
      await queryRunner.query('SELECT pg_sleep(0.2)');
      await queryRunner.query(`CREATE TABLE "${schema}".fixture (id int PRIMARY KEY)`);
      for (const sql of [...outboxTableSql(schema), ...processedMessagesTableSql(schema)]) await queryRunner.query(sql);
    }

    async down(queryRunner: QueryRunner): Promise<void> {
      await queryRunner.query(`DROP TABLE "${schema}".processed_messages, "${schema}".outbox, "${schema}".fixture`);
    }
  };
}

/** Mapped but created by no migration: its table exists only if something synchronized. */
@Entity('never_synchronized')
class NeverSynchronizedEntity {
  @PrimaryColumn('uuid')
  id!: string;

  @Column('text')
  label!: string;
}

const migrations = { [SCHEMA]: fixtureMigration(SCHEMA), [RACE_SCHEMA]: fixtureMigration(RACE_SCHEMA) };

function open(url: string, schema: typeof SCHEMA | typeof RACE_SCHEMA, poolSize = 4): Promise<DataSource> {
  return openServiceDatabase({
    url,
    schema,
    entities: [NeverSynchronizedEntity],
    migrations: [migrations[schema]],
    applicationName: 'persistence-int-spec',
    poolSize,
  });
}

interface Published {
  readonly topic: string;
  readonly id: string;
  readonly type: string;
  readonly key: string;
  readonly payload: unknown;
  readonly headers?: Record<string, string>;
}

/**
 * A publisher that keeps what it was given; `failOn` makes a batch holding that message type
 * fail after the messages before it went out (a broker can take part of a batch).
 */
class RecordingPublisher implements OutboxPublisher {
  readonly published: Published[] = [];

  constructor(private readonly behaviour: { failOn?: string; delayMs?: number } = {}) {}

  async publishAll(items: ReadonlyArray<{ topic: string; message: Omit<Published, 'topic'> }>): Promise<void> {
    if (this.behaviour.delayMs) await new Promise((resolve) => setTimeout(resolve, this.behaviour.delayMs));
    for (const { topic, message } of items) {
      if (message.type === this.behaviour.failOn) throw new Error(`broker refused ${message.type}`);
      this.published.push({ topic, ...message });
    }
  }
}

const tenantA = randomUUID();
const tenantB = randomUUID();

function event(type: string, payload: unknown = { type }): OutboxEvent {
  return { topic: 'fixture.events.v1', type, key: `key-${type}`, payload };
}

/**
 * Messages sent to PostgreSQL while `run` runs (every pg client's query calls), but the probes
 * that try whether a statement prepares (they go on other connections, whenever a statement is new).
 */
async function countingMessages<T>(run: () => Promise<T>, ignoring: readonly Client[] = []): Promise<{ result: T; messages: string[] }> {
  const spy = jest.spyOn(Client.prototype, 'query');
  try {
    const result = await run();
    const calls = spy.mock.calls.filter((_call, index) => !ignoring.includes(spy.mock.contexts[index] as Client));
    const messages = calls.map(([text]) => (typeof text === 'string' ? text : String((text as { text?: string }).text)));
    return { result, messages: messages.filter((text) => !isPreparationProbe(text)) };
  } finally {
    spy.mockRestore();
  }
}

describe('persistence on PostgreSQL', () => {
  let database: TestDatabase;
  let dataSource: DataSource;

  /** One relay pass, as a freshly started replica would make it; resolves when the pass is over. */
  async function relayPass(publisher: OutboxPublisher, options: OutboxRelayOptions = {}): Promise<void> {
    const relay = new OutboxRelay(dataSource, SCHEMA, publisher, options);
    relay.kick();
    await relay.stop();
  }

  async function enqueueCommitted(tenantId: string, outboxEvent: OutboxEvent): Promise<string> {
    return runWithTenant({ tenantId }, () => dataSource.transaction((manager) => enqueueOutbox(manager, SCHEMA, outboxEvent)));
  }

  async function unpublishedIds(): Promise<string[]> {
    const rows: Array<{ id: string }> = await dataSource.query(`SELECT id FROM "${SCHEMA}".outbox WHERE published_at IS NULL`);
    return rows.map((row) => row.id);
  }

  beforeAll(async () => {
    database = await createTestDatabase(ADMIN_URL, 'persistence_test');
    dataSource = await open(database.url, SCHEMA);
  });

  afterAll(async () => {
    if (dataSource?.isInitialized) await dataSource.destroy();
    await database?.drop();
  });

  beforeEach(async () => {
    await dataSource.query(`TRUNCATE "${SCHEMA}".outbox, "${SCHEMA}".processed_messages`);
  });

  describe('openServiceDatabase', () => {
    it('creates the schema and applies each migration exactly once when several replicas open it at the same time', async () => {
      const replicas = await Promise.all([1, 2, 3, 4].map(() => open(database.url, RACE_SCHEMA, 2)));
      try {
        expect(migrationRuns[RACE_SCHEMA]).toBe(1);
        const applied = await replicas[0].query(`SELECT name FROM "${RACE_SCHEMA}".migrations`);
        expect(applied).toEqual([{ name: 'CreateFixture1700000000000' }]);
        const tables: Array<{ table_name: string }> = await replicas[0].query(`SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name`, [
          RACE_SCHEMA,
        ]);
        expect(tables.map((row) => row.table_name)).toEqual(['fixture', 'migrations', 'outbox', 'processed_messages']);
      } finally {
        await Promise.all(replicas.map((replica) => replica.destroy()));
      }
    });

    it('never synchronizes entities: a mapped table that no migration creates does not exist', async () => {
      expect(dataSource.options.synchronize).toBe(false);
      const [row] = await dataSource.query(`SELECT to_regclass($1) AS found`, [`"${SCHEMA}".never_synchronized`]);
      expect(row.found).toBeNull();
    });

    it('migrates a fresh schema with a pool of a single connection', async () => {
      const single = await withDeadline(
        openServiceDatabase({
          url: database.url,
          schema: 'persistence_single',
          entities: [],
          migrations: [fixtureMigration('persistence_single')],
          applicationName: 'persistence-int-spec',
          poolSize: 1,
        }),
        10_000,
      );
      try {
        await expect(single.query(`SELECT name FROM persistence_single.migrations`)).resolves.toEqual([{ name: 'CreateFixture1700000000000' }]);
      } finally {
        await single.destroy();
      }
    });

    it('treats opening an up-to-date schema as a no-op', async () => {
      const runsBefore = migrationRuns[SCHEMA];
      expect(runsBefore).toBe(1);
      const again = await open(database.url, SCHEMA, 1);
      try {
        expect(migrationRuns[SCHEMA]).toBe(runsBefore);
        await expect(again.showMigrations()).resolves.toBe(false);
        const applied = await again.query(`SELECT name FROM "${SCHEMA}".migrations`);
        expect(applied).toEqual([{ name: 'CreateFixture1700000000000' }]);
      } finally {
        await again.destroy();
      }
    });

    it('rejects with the error of a failing migration, rolls it back and leaves the schema to the next replica', async () => {
      const schema = 'persistence_broken';
      class Broken1700000000000 implements MigrationInterface {
        name = 'Broken1700000000000';
        async up(queryRunner: QueryRunner): Promise<void> {
          await queryRunner.query(`CREATE TABLE "${schema}".half_done (id int)`);
          throw new Error('migration bug');
        }
        async down(): Promise<void> {}
      }
      class Fixed1700000000000 implements MigrationInterface {
        name = 'Fixed1700000000000';
        async up(queryRunner: QueryRunner): Promise<void> {
          await queryRunner.query(`CREATE TABLE "${schema}".half_done (id int)`);
        }
        async down(): Promise<void> {}
      }
      const options = { url: database.url, schema, entities: [], applicationName: 'persistence-int-spec', poolSize: 2 };

      const failure = openServiceDatabase({ ...options, migrations: [Broken1700000000000] }).then(
        () => new Error('the open succeeded'),
        (error: unknown) => error,
      );
      await expect(withDeadline(failure, 10_000)).resolves.toEqual(expect.objectContaining({ message: 'migration bug' }));
      const [leftover] = await dataSource.query(`SELECT to_regclass($1) AS found`, [`"${schema}".half_done`]);
      expect(leftover.found).toBeNull();

      const fixed = await withDeadline(openServiceDatabase({ ...options, migrations: [Fixed1700000000000] }), 10_000);
      try {
        await expect(fixed.query(`SELECT name FROM "${schema}".migrations`)).resolves.toEqual([{ name: 'Fixed1700000000000' }]);
      } finally {
        await fixed.destroy();
      }
    });

    it('refuses a schema name that is not a plain identifier, before connecting', async () => {
      await expect(
        openServiceDatabase({ url: 'postgres://nobody@127.0.0.1:1/none', schema: 'x"; DROP SCHEMA public; --', entities: [], migrations: [], applicationName: 'x' }),
      ).rejects.toThrow(/Invalid schema name/);
    });
  });

  describe('tenantTransaction', () => {
    it('sets app.tenant_id to the current tenant for the transaction only', async () => {
      const single = await open(database.url, SCHEMA, 1);
      try {
        const inside = await runWithTenant({ tenantId: tenantA }, () =>
          tenantTransaction(single, async (manager) => {
            const [row] = await manager.query(`SELECT current_setting('app.tenant_id', true) AS tenant, pg_backend_pid() AS pid`);
            return row as { tenant: string; pid: number };
          }),
        );
        expect(inside.tenant).toBe(tenantA);

        // One pooled connection: the next query runs in the same session, after the transaction.
        const [after] = await single.query(`SELECT current_setting('app.tenant_id', true) AS tenant, pg_backend_pid() AS pid`);
        expect(after.pid).toBe(inside.pid);
        expect(after.tenant ?? '').toBe('');
      } finally {
        await single.destroy();
      }
    });

    it("sets a transaction's own settings with the tenant, in its first message, and only for it", async () => {
      const { result, messages } = await countingMessages(() =>
        runWithTenant({ tenantId: tenantA }, () =>
          tenantTransaction(
            dataSource,
            (manager) =>
              manager.query(`SELECT current_setting($1) AS tenant, current_setting($2) AS work_mem, current_setting($3) AS seqscan`, [
                'app.tenant_id',
                'work_mem',
                'enable_seqscan',
              ]),
            { settings: { work_mem: '48MB', enable_seqscan: 'off' } },
          ),
        ),
      );
      expect(result).toEqual([{ tenant: tenantA, work_mem: '48MB', seqscan: 'off' }]);
      expect(messages[0]).toMatch(
        /^START TRANSACTION;\nSELECT set_config\('app\.tenant_id', .*, set_config\('work_mem', '48MB', true\), set_config\('enable_seqscan', 'off', true\);\nSELECT current_setting/s,
      );
      const [after] = await runWithTenant({ tenantId: tenantA }, () => tenantTransaction(dataSource, (manager) => manager.query(`SELECT current_setting('work_mem') AS work_mem`)));
      expect(after.work_mem).not.toBe('48MB');
      await expect(
        runWithTenant({ tenantId: tenantA }, () => tenantTransaction(dataSource, async () => undefined, { settings: { "work_mem'; DROP TABLE x; --": '1' } })),
      ).rejects.toThrow("Not a setting's name");
      // Nothing that would override the tenant, the role or the policies.
      for (const name of ['app.tenant_id', 'role', 'search_path', 'row_security', 'session_authorization']) {
        await expect(runWithTenant({ tenantId: tenantA }, () => tenantTransaction(dataSource, async () => undefined, { settings: { [name]: tenantB } }))).rejects.toThrow(
          TypeError,
        );
      }
      // A value is a literal, whatever it holds.
      const [quoted] = await runWithTenant({ tenantId: tenantA }, () =>
        tenantTransaction(dataSource, (manager) => manager.query(`SELECT current_setting($1) AS value`, ['application_name']), { settings: { application_name: "it's; --" } }),
      );
      expect(quoted.value).toBe("it's; --");
    });

    it('binds concurrent transactions each to its own tenant', async () => {
      const seen = await Promise.all(
        [tenantA, tenantB].map((tenantId) =>
          runWithTenant({ tenantId }, () =>
            tenantTransaction(dataSource, async (manager) => {
              await manager.query('SELECT pg_sleep(0.05)');
              const [row] = await manager.query(`SELECT current_setting('app.tenant_id', true) AS tenant`);
              return row.tenant as string;
            }),
          ),
        ),
      );
      expect(seen).toEqual([tenantA, tenantB]);
    });

    it('fails as an outage (dependency_unavailable on the bus) when the database ends the session or cannot be reached, not for a bad statement', async () => {
      // The session ended mid-transaction: at once (the next statement meets it), and with the end
      // reaching the idle connection first (TypeORM then releases the runner and drops its error).
      for (const waitForTheEnd of [false, true]) {
        const single = await open(database.url, SCHEMA, 1);
        try {
          const ended = await runWithTenant({ tenantId: tenantA }, () =>
            tenantTransaction(single, async (manager) => {
              const [{ pid }] = await manager.query('SELECT pg_backend_pid() AS pid');
              const client = (await manager.queryRunner?.connect()) as { once(event: string, listener: () => void): void };
              const gone = new Promise<void>((resolve) => client.once('error', resolve));
              await dataSource.query('SELECT pg_terminate_backend($1)', [pid]);
              if (waitForTheEnd) await gone;
              return manager.query('SELECT 1');
            }),
          ).then(
            () => undefined,
            (error: unknown) => error,
          );
          expect({ waitForTheEnd, ended: ended !== undefined, unavailable: isDependencyUnavailable(ended) }).toEqual({ waitForTheEnd, ended: true, unavailable: true });
        } finally {
          await single.destroy();
        }
      }
      const unreachable = new DataSource({ type: 'postgres', url: 'postgres://postgres@127.0.0.1:1/none', connectTimeoutMS: 2_000 });
      const refused = await unreachable.initialize().then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(isDependencyUnavailable(refused)).toBe(true);
      const duplicate = await dataSource.query(`INSERT INTO "${SCHEMA}".fixture (id) VALUES (1), (1)`).then(
        () => undefined,
        (error: unknown) => error,
      );
      expect((duplicate as { driverError?: { code?: string } }).driverError?.code).toBe('23505');
      expect(isDependencyUnavailable(duplicate)).toBe(false);
    });

    describe('pipelined statements', () => {
      const insertEvent = `INSERT INTO "${SCHEMA}".outbox (id, topic, type, key, payload, headers) VALUES ($1, current_setting($2, true), $3, $4, $5, $6)`;

      it('sends a transaction that writes, reads back and writes again in two messages, in order and under its tenant', async () => {
        const id = randomUUID();
        const { result, messages } = await countingMessages(() =>
          runWithTenant({ tenantId: tenantA }, () =>
            tenantTransaction(dataSource, async (manager) => {
              await deferWrite(manager, insertEvent, [id, 'app.tenant_id', 'fixture', 'k', '{"n":1}', '{}']);
              const [row] = await manager.query(`SELECT topic, payload FROM "${SCHEMA}".outbox WHERE id = $1`, [id]);
              await deferWrite(manager, `UPDATE "${SCHEMA}".outbox SET type = $2 WHERE id = $1`, [id, 'updated']);
              return row as { topic: string; payload: unknown };
            }),
          ),
        );
        // The write was there for the read, in the tenant's transaction.
        expect(result).toEqual({ topic: tenantA, payload: { n: 1 } });
        expect(messages).toHaveLength(2);
        expect(messages[0]).toMatch(
          new RegExp(`^START TRANSACTION;\\n${sentStatement('SELECT set_config\\(')}.*;\\n${sentStatement('INSERT ')}.*;\\n${sentStatement('SELECT topic')}`, 's'),
        );
        expect(messages[1]).toMatch(new RegExp(`^${sentStatement('UPDATE ')}.*;\\nCOMMIT$`, 's'));
        const [stored] = await dataSource.query(`SELECT type FROM "${SCHEMA}".outbox WHERE id = $1`, [id]);
        expect(stored.type).toBe('updated');
      });

      it('fails the commit with the error of a held write and keeps nothing of the transaction; the connection serves the next one', async () => {
        const single = await open(database.url, SCHEMA, 1);
        try {
          const id = randomUUID();
          const failed = await runWithTenant({ tenantId: tenantA }, () =>
            tenantTransaction(single, async (manager) => {
              await deferWrite(manager, insertEvent, [id, 'app.tenant_id', 'fixture', 'k', '{}', '{}']);
              await deferWrite(manager, `INSERT INTO "${SCHEMA}".fixture (id) VALUES ($1)`, [41]);
              await deferWrite(manager, `INSERT INTO "${SCHEMA}".fixture (id) VALUES ($1)`, [41]);
            }),
          ).then(
            () => undefined,
            (error: unknown) => error,
          );
          expect(failed).toBeInstanceOf(QueryFailedError);
          expect((failed as QueryFailedError & { driverError: { code?: string } }).driverError.code).toBe('23505');
          // The error names the statement that was sent, never the values inlined into the message.
          expect((failed as QueryFailedError).query).toBe('COMMIT');
          expect(await single.query(`SELECT count(*)::int AS n FROM "${SCHEMA}".outbox WHERE id = $1`, [id])).toEqual([{ n: 0 }]);
          expect(await single.query(`SELECT count(*)::int AS n FROM "${SCHEMA}".fixture WHERE id = 41`)).toEqual([{ n: 0 }]);
          // The one pooled connection is out of the aborted transaction.
          const [{ tenant }] = await runWithTenant({ tenantId: tenantB }, () =>
            tenantTransaction(single, (manager) => manager.query(`SELECT current_setting('app.tenant_id', true) AS tenant`)),
          );
          expect(tenant).toBe(tenantB);
        } finally {
          await single.destroy();
        }
      });

      it('fails the commit of a transaction whose held write failed, even when the caller swallowed the error it surfaced with', async () => {
        const failed = await runWithTenant({ tenantId: tenantA }, () =>
          tenantTransaction(dataSource, async (manager) => {
            await deferWrite(manager, `INSERT INTO "${SCHEMA}".fixture (id) VALUES ($1), ($1)`, [46]);
            // The held write's error surfaces with this read, and the caller ignores it.
            await manager.query(`SELECT count(*) FROM "${SCHEMA}".fixture WHERE id = $1`, [46]).catch(() => undefined);
          }),
        ).then(
          () => undefined,
          (error: unknown) => error,
        );
        expect(failed).toBeInstanceOf(QueryFailedError);
        expect((failed as Error).message).toContain('rolled back');
        expect(await dataSource.query(`SELECT count(*)::int AS n FROM "${SCHEMA}".fixture WHERE id = 46`)).toEqual([{ n: 0 }]);
      });

      it('keeps the writes before a savepoint and drops the held ones after it when rolled back to it', async () => {
        await runWithTenant({ tenantId: tenantA }, () =>
          tenantTransaction(dataSource, async (manager) => {
            await deferWrite(manager, `INSERT INTO "${SCHEMA}".fixture (id) VALUES ($1)`, [47]);
            await manager.query('SAVEPOINT inner_work');
            await deferWrite(manager, `INSERT INTO "${SCHEMA}".fixture (id) VALUES ($1), ($1)`, [48]);
            await manager.query('ROLLBACK TO SAVEPOINT inner_work');
          }),
        );
        expect(await dataSource.query(`SELECT id FROM "${SCHEMA}".fixture WHERE id IN (47, 48) ORDER BY id`)).toEqual([{ id: 47 }]);
      });

      it('sends nothing for a transaction that neither reads nor writes, nor for one that fails before sending', async () => {
        const { messages } = await countingMessages(async () => {
          await runWithTenant({ tenantId: tenantA }, () => tenantTransaction(dataSource, async () => 'nothing'));
          await runWithTenant({ tenantId: tenantA }, () =>
            tenantTransaction(dataSource, async (manager) => {
              await deferWrite(manager, `INSERT INTO "${SCHEMA}".fixture (id) VALUES ($1)`, [42]);
              throw new Error('changed my mind');
            }),
          ).catch(() => undefined);
        });
        expect(messages).toEqual([]);
        expect(await dataSource.query(`SELECT count(*)::int AS n FROM "${SCHEMA}".fixture WHERE id = 42`)).toEqual([{ n: 0 }]);
      });

      it('runs a statement whose parameters cannot be inlined as a parameterised one, after what was held', async () => {
        await runWithTenant({ tenantId: tenantA }, () =>
          tenantTransaction(dataSource, async (manager) => {
            await deferWrite(manager, `INSERT INTO "${SCHEMA}".fixture (id) VALUES ($1), ($2)`, [43, 44]);
            // A buffer is not inlined (node-postgres sends it as bytes).
            const [{ n }] = await manager.query(`SELECT count(*)::int AS n FROM "${SCHEMA}".fixture WHERE id = ANY($1::int[]) AND $2::bytea IS NOT NULL`, [
              [43, 44, 45],
              Buffer.from([0, 1]),
            ]);
            expect(n).toBe(2);
            throw new Error('roll back');
          }),
        ).catch((error: Error) => expect(error.message).toBe('roll back'));
        expect(await dataSource.query(`SELECT count(*)::int AS n FROM "${SCHEMA}".fixture WHERE id IN (43, 44)`)).toEqual([{ n: 0 }]);
      });

      it('reads arrays inlined into a message exactly as the same arrays sent as parameters, in the message that opens the transaction', async () => {
        const element = fc.oneof(
          fc.string({ unit: 'grapheme', maxLength: 12 }).filter((text) => !text.includes('\u0000')),
          fc.constantFrom('NULL', '"', '\\', '{', '}', ',', ' ', ''),
          fc.constant(null),
        );
        await fc.assert(
          fc.asyncProperty(fc.array(element, { maxLength: 8 }), fc.array(fc.integer(), { maxLength: 8 }), async (texts, numbers) => {
            const statement = `SELECT $1::text[] AS texts, $2::bigint[] AS numbers, cardinality($1::text[]) AS count`;
            const { result, messages } = await countingMessages(() =>
              runWithTenant({ tenantId: tenantA }, () => tenantTransaction(dataSource, (manager) => manager.query(statement, [texts, numbers]))),
            );
            expect(result).toEqual(await dataSource.query(statement, [texts, numbers]));
            expect(messages[0]).toMatch(new RegExp(`^START TRANSACTION;\\n${sentStatement('SELECT set_config\\(')}.*;\\n${sentStatement('SELECT .*::text\\[\\] AS texts')}`, 's'));
          }),
          { numRuns: 60 },
        );
      });

      describe('prepared statements', () => {
        const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
        const inTenantA = <T>(source: DataSource, work: (manager: EntityManager) => Promise<T>) => runWithTenant({ tenantId: tenantA }, () => tenantTransaction(source, work));

        it('prepares a statement once a probe has shown it prepares, then sends only its EXECUTE, with the same rows', async () => {
          const single = await open(database.url, SCHEMA, 1);
          try {
            const select = `SELECT $1::int + 1 AS next, $2::text AS label`;
            const forms: string[] = [];
            for (let run = 0; run < 200 && !forms.includes('execute'); run++) {
              const { result, messages } = await countingMessages(() => inTenantA(single, (manager) => manager.query(select, [run, `run ${run}`])));
              expect(result).toEqual([{ next: run + 1, label: `run ${run}` }]);
              const [message] = messages;
              const form = new RegExp(`PREPARE (mission_[0-9a-f]{32}) AS ${select.replace(/[$()+:]/g, '\\$&')};\\nEXECUTE \\1\\('${run}', 'run ${run}'\\)`).test(message ?? '')
                ? 'prepare'
                : /EXECUTE mission_[0-9a-f]{32}\('\d+', 'run \d+'\)/.test(message ?? '')
                  ? 'execute'
                  : message?.includes(`SELECT '${run}'::int + 1 AS next`)
                    ? 'inline'
                    : `unexpected: ${message}`;
              if (forms[forms.length - 1] !== form) forms.push(form);
              if (form === 'inline') await pause(10);
            }
            // Inlined until the probe answered, prepared once on the pool's one connection, then only executed.
            expect(forms).toEqual(['inline', 'prepare', 'execute']);
          } finally {
            await single.destroy();
          }
        });

        it('keeps inlined a statement PostgreSQL cannot prepare (`$1 IS NULL`: a parameter of no inferable type), without failing a transaction', async () => {
          const single = await open(database.url, SCHEMA, 1);
          try {
            for (let run = 0; run < 20; run++) {
              const { result, messages } = await countingMessages(() =>
                inTenantA(single, (manager) => manager.query(`SELECT $1 IS NULL AS missing, $2::int AS run`, [run % 2 === 0 ? null : 'x', run])),
              );
              expect(result).toEqual([{ missing: run % 2 === 0, run }]);
              expect(messages[0]).toMatch(/SELECT (NULL|'x') IS NULL AS missing, '\d+'::int AS run$/);
              await pause(10);
            }
          } finally {
            await single.destroy();
          }
        });

        it('makes the connection forget its prepared statements when a message that prepared some failed, so the next transaction prepares them again', async () => {
          const single = await open(database.url, SCHEMA, 1);
          const insert = `INSERT INTO "${SCHEMA}".fixture (id) VALUES ($1)`;
          try {
            // Until one failing message carries PREPAREs: the statements are inlined while their probes run.
            let prepared = false;
            for (let run = 0; run < 200 && !prepared; run++) {
              const { messages } = await countingMessages(() =>
                inTenantA(single, async (manager) => {
                  await deferWrite(manager, insert, [70]);
                  return manager.query(`SELECT 1 / $1::int AS broken`, [0]).catch((error: Error) => error);
                }).catch((error: Error) => error),
              );
              prepared = messages.some((text) => /PREPARE mission_\w+ AS INSERT/.test(text) && text.includes('/ $1::int'));
              if (!prepared) await pause(10);
            }
            expect(prepared).toBe(true);
            expect(await dataSource.query(`SELECT count(*)::int AS n FROM "${SCHEMA}".fixture WHERE id = 70`)).toEqual([{ n: 0 }]);
            // The same statements again on the same connection: prepared anew, not refused as existing.
            const { messages } = await countingMessages(() =>
              inTenantA(single, async (manager) => {
                await deferWrite(manager, insert, [71]);
                return manager.query(`SELECT 1 / $1::int AS broken`, [1]);
              }),
            );
            expect(messages.find((text) => text.includes('/ $1::int'))).toMatch(/PREPARE mission_\w+ AS INSERT/);
            expect(await dataSource.query(`SELECT count(*)::int AS n FROM "${SCHEMA}".fixture WHERE id = 71`)).toEqual([{ n: 1 }]);
          } finally {
            await single.destroy();
            await dataSource.query(`DELETE FROM "${SCHEMA}".fixture WHERE id IN (70, 71)`);
          }
        });

        it('lets a savepoint recover a statement whose message prepared it and failed: the rest of the transaction goes inlined', async () => {
          const single = await open(database.url, SCHEMA, 1);
          const insert = `INSERT INTO "${SCHEMA}".fixture (id) VALUES ($1)`;
          await dataSource.query(`INSERT INTO "${SCHEMA}".fixture (id) VALUES (80)`);
          try {
            let prepared = false;
            for (let run = 0; run < 200 && !prepared; run++) {
              const id = 81 + run;
              const { messages } = await countingMessages(() =>
                inTenantA(single, async (manager) => {
                  await manager.query('SAVEPOINT retry');
                  await deferWrite(manager, insert, [80]);
                  const failed = await manager.query(`SELECT count(*)::int AS n FROM "${SCHEMA}".fixture WHERE id = $1`, [80]).catch((error: Error) => error);
                  expect(failed).toBeInstanceOf(QueryFailedError);
                  await manager.query('ROLLBACK TO SAVEPOINT retry');
                  await deferWrite(manager, insert, [id]);
                }),
              );
              prepared = messages.some((text) => /PREPARE mission_\w+ AS INSERT INTO/.test(text) && text.includes("'80'"));
              expect(await dataSource.query(`SELECT count(*)::int AS n FROM "${SCHEMA}".fixture WHERE id = $1`, [id])).toEqual([{ n: 1 }]);
              if (!prepared) await pause(10);
            }
            expect(prepared).toBe(true);
          } finally {
            await single.destroy();
            await dataSource.query(`DELETE FROM "${SCHEMA}".fixture WHERE id >= 80 AND id < 300`);
          }
        });

        it('prepares anew on a connection whose kept plan a migration made obsolete (a column added under a SELECT *): one transaction fails, the next succeeds', async () => {
          const single = await open(database.url, SCHEMA, 1);
          await dataSource.query(`CREATE TABLE "${SCHEMA}".reshaped (id int PRIMARY KEY)`);
          const select = `SELECT * FROM "${SCHEMA}".reshaped WHERE id = $1`;
          try {
            let executed = false;
            for (let run = 0; run < 200 && !executed; run++) {
              const { messages } = await countingMessages(() => inTenantA(single, (manager) => manager.query(select, [run])));
              executed = messages.some((text) => /^START TRANSACTION;\nEXECUTE mission_\w+\([^)]*\);\nEXECUTE mission_\w+\('\d+'\)$/.test(text));
              if (!executed) await pause(10);
            }
            expect(executed).toBe(true);
            await dataSource.query(`ALTER TABLE "${SCHEMA}".reshaped ADD COLUMN label text`);
            await dataSource.query(`INSERT INTO "${SCHEMA}".reshaped VALUES (1, 'one')`);
            await expect(inTenantA(single, (manager) => manager.query(select, [1]))).rejects.toThrow(/cached plan must not change result type/);
            await expect(inTenantA(single, (manager) => manager.query(select, [1]))).resolves.toEqual([{ id: 1, label: 'one' }]);
          } finally {
            await single.destroy();
            await dataSource.query(`DROP TABLE "${SCHEMA}".reshaped`);
          }
        });

        it('prepares the statements of a transaction with settings under names of their own for those settings: a kept plan serves only them', async () => {
          const single = await open(database.url, SCHEMA, 1);
          try {
            const select = `SELECT $1::int AS n, current_setting($2) AS work_mem`;
            const escaped = select.replace(/[$()+:]/g, '\\$&');
            /** Runs the statement until its message only EXECUTEs it; the name it was PREPAREd under. */
            const preparedName = async (settings: Record<string, string> | undefined, expected: string): Promise<string> => {
              let name: string | undefined;
              for (let run = 0; run < 200; run++) {
                const { result, messages } = await countingMessages(() =>
                  runWithTenant({ tenantId: tenantA }, () => tenantTransaction(single, (manager) => manager.query(select, [run, 'work_mem']), settings ? { settings } : {})),
                );
                expect(result).toEqual([{ n: run, work_mem: expected }]);
                const message = messages[0] ?? '';
                name ??= new RegExp(`PREPARE (mission_[0-9a-f]{32}) AS ${escaped};\\nEXECUTE \\1\\('${run}', 'work_mem'\\)`).exec(message)?.[1];
                if (name !== undefined && message.includes(`EXECUTE ${name}('${run}', 'work_mem')`) && !message.includes('PREPARE')) return name;
                await pause(5);
              }
              throw new Error('The statement was never prepared');
            };
            const [{ work_mem: defaultWorkMem }] = await single.query(`SELECT current_setting('work_mem') AS work_mem`);
            const under40 = await preparedName({ work_mem: '40MB' }, '40MB');
            const plain = await preparedName(undefined, defaultWorkMem);
            const under41 = await preparedName({ work_mem: '41MB' }, '41MB');
            expect(new Set([under40, plain, under41]).size).toBe(3);
            // Each name goes on being used under its own settings only.
            const { result, messages } = await countingMessages(() =>
              runWithTenant({ tenantId: tenantA }, () => tenantTransaction(single, (manager) => manager.query(select, [7, 'work_mem']), { settings: { work_mem: '40MB' } })),
            );
            expect(result).toEqual([{ n: 7, work_mem: '40MB' }]);
            expect(messages[0]).toContain(`EXECUTE ${under40}('7', 'work_mem')`);
            const held: Array<{ name: string; statement: string }> = await runWithTenant({ tenantId: tenantA }, () =>
              tenantTransaction(single, (manager) => manager.query(`SELECT name, statement FROM pg_prepared_statements`)),
            );
            // `statement` holds the whole message the PREPARE came in.
            const holding = held.filter((row) => row.statement.includes(`PREPARE ${row.name} AS ${select}`)).map((row) => row.name);
            expect(holding.sort()).toEqual([under40, plain, under41].sort());
          } finally {
            await single.destroy();
          }
        });
      });

      it('runs queryInOneTrip statements in one message with what was held, each seeing what committed while the one before waited for a lock', async () => {
        await dataSource.query(`INSERT INTO "${SCHEMA}".fixture (id) VALUES (60)`);
        const holder = new Client({ connectionString: database.url });
        await holder.connect();
        try {
          const [{ pid: holderPid }] = (await holder.query('SELECT pg_backend_pid() AS pid')).rows;
          await holder.query('BEGIN');
          await holder.query(`UPDATE "${SCHEMA}".fixture SET id = 60 WHERE id = 60`);
          const counted = countingMessages(
            () =>
              runWithTenant({ tenantId: tenantA }, () =>
                tenantTransaction(dataSource, async (manager) => {
                  await deferWrite(manager, `INSERT INTO "${SCHEMA}".fixture (id) VALUES ($1)`, [61]);
                  return queryInOneTrip(manager, [
                    { sql: `UPDATE "${SCHEMA}".fixture SET id = id WHERE id = $1 RETURNING id AS one_trip_probe`, parameters: [60] },
                    { sql: `SELECT id FROM "${SCHEMA}".fixture WHERE id = ANY($1::int[]) ORDER BY id`, parameters: [[61, 62]] },
                  ]);
                }),
              ),
            [holder],
          );
          // Awaited below; a failure while the wait loop polls must not go unhandled meanwhile.
          counted.catch(() => undefined);
          // The update waits for the holder's lock; meanwhile another transaction commits row 62.
          for (let waited = 0; ; waited += 20) {
            const [{ n }] = await dataSource.query(
              `SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database() AND pid <> $1`,
              [holderPid],
            );
            if (n > 0) break;
            if (waited > 10_000) throw new Error('The update never waited for the lock');
            await new Promise((resolve) => setTimeout(resolve, 20));
          }
          await dataSource.query(`INSERT INTO "${SCHEMA}".fixture (id) VALUES (62)`);
          await holder.query('COMMIT');
          const { result, messages: all } = await counted;
          // The transaction's own messages (the wait and the other insert above went meanwhile).
          const messages = all.filter((text) => !text.includes('pg_stat_activity') && !text.includes('VALUES (62)'));
          expect(result).toEqual([[{ one_trip_probe: 60 }], [{ id: 61 }, { id: 62 }]]);
          expect(messages).toHaveLength(2);
          expect(messages[0]).toMatch(
            new RegExp(
              `^START TRANSACTION;\\n${sentStatement('SELECT set_config\\(')}.*;\\n${sentStatement('INSERT ')}.*;\\n${sentStatement('UPDATE ')}.*;\\n${sentStatement('SELECT id ')}.*$`,
              's',
            ),
          );
          expect(messages[1]).toBe('COMMIT');
          // Outside a pipelined transaction the statements run one after the other, with the same rows.
          expect(await queryInOneTrip(dataSource.manager, [{ sql: `SELECT id FROM "${SCHEMA}".fixture WHERE id = $1`, parameters: [62] }, { sql: 'SELECT 1 AS one' }])).toEqual([
            [{ id: 62 }],
            [{ one: 1 }],
          ]);
        } finally {
          await holder.query('ROLLBACK').catch(() => undefined);
          await holder.end();
          await dataSource.query(`DELETE FROM "${SCHEMA}".fixture WHERE id IN (60, 61, 62)`);
        }
      });

      it('runs a queryAndCommit statement in one message with what was held and the COMMIT, and nothing after it', async () => {
        const counted = await countingMessages(() =>
          runWithTenant({ tenantId: tenantA }, () =>
            tenantTransaction(dataSource, async (manager) => {
              await deferWrite(manager, `INSERT INTO "${SCHEMA}".fixture (id) VALUES ($1)`, [63]);
              return queryAndCommit(manager, `SELECT id AS last_statement FROM "${SCHEMA}".fixture WHERE id = $1`, [63]);
            }),
          ),
        );
        expect(counted.result).toEqual([{ last_statement: 63 }]);
        expect(counted.messages).toHaveLength(1);
        expect(counted.messages[0]).toMatch(
          new RegExp(
            `^START TRANSACTION;\\n${sentStatement('SELECT set_config\\(')}.*;\\n${sentStatement('INSERT ')}.*;\\n${sentStatement('SELECT id AS last_statement')}.*;\\nCOMMIT$`,
            's',
          ),
        );
        // Committed: another connection sees the row.
        expect(await dataSource.query(`SELECT id FROM "${SCHEMA}".fixture WHERE id = 63`)).toEqual([{ id: 63 }]);

        // Nothing may follow it: the work fails, and what it committed stays.
        await expect(
          runWithTenant({ tenantId: tenantA }, () =>
            tenantTransaction(dataSource, async (manager) => {
              await queryAndCommit(manager, `INSERT INTO "${SCHEMA}".fixture (id) VALUES ($1) RETURNING id`, [64]);
              await manager.query(`INSERT INTO "${SCHEMA}".fixture (id) VALUES ($1)`, [65]);
            }),
          ),
        ).rejects.toThrow('no statement may follow');
        expect(await dataSource.query(`SELECT id FROM "${SCHEMA}".fixture WHERE id IN (64, 65) ORDER BY id`)).toEqual([{ id: 64 }]);
        // Nor a held write, nor statements in one trip: refused, never sent on their own outside the transaction.
        for (const after of [
          (manager: EntityManager) => deferWrite(manager, `INSERT INTO "${SCHEMA}".fixture (id) VALUES ($1)`, [67]),
          (manager: EntityManager) => queryInOneTrip(manager, [{ sql: `INSERT INTO "${SCHEMA}".fixture (id) VALUES ($1)`, parameters: [67] }]),
          (manager: EntityManager) => queryAndCommit(manager, `SELECT $1::int AS again`, [67]),
        ]) {
          await expect(
            runWithTenant({ tenantId: tenantA }, () =>
              tenantTransaction(dataSource, async (manager) => {
                await queryAndCommit(manager, `SELECT 1 AS first`);
                await after(manager);
              }),
            ),
          ).rejects.toThrow('no statement may follow');
        }
        expect(await dataSource.query(`SELECT id FROM "${SCHEMA}".fixture WHERE id = 67`)).toEqual([]);
        // Inside a savepoint the COMMIT would end the whole transaction: refused, and the transaction rolls back.
        await expect(
          runWithTenant({ tenantId: tenantA }, () =>
            tenantTransaction(dataSource, async (manager) => {
              await deferWrite(manager, `INSERT INTO "${SCHEMA}".fixture (id) VALUES ($1)`, [68]);
              await manager.transaction((inner) => queryAndCommit(inner, `SELECT 1 AS nested`));
            }),
          ),
        ).rejects.toThrow('inside a savepoint');
        expect(await dataSource.query(`SELECT id FROM "${SCHEMA}".fixture WHERE id = 68`)).toEqual([]);

        // A statement that fails takes the transaction with it: the held write is not committed.
        await expect(
          runWithTenant({ tenantId: tenantA }, () =>
            tenantTransaction(dataSource, async (manager) => {
              await deferWrite(manager, `INSERT INTO "${SCHEMA}".fixture (id) VALUES ($1)`, [66]);
              return queryAndCommit(manager, `SELECT 1 / (id - id) FROM "${SCHEMA}".fixture WHERE id = $1`, [63]);
            }),
          ),
        ).rejects.toThrow();
        expect(await dataSource.query(`SELECT id FROM "${SCHEMA}".fixture WHERE id = 66`)).toEqual([]);
        // Outside a pipelined transaction, an ordinary query.
        expect(await queryAndCommit(dataSource.manager, `SELECT id FROM "${SCHEMA}".fixture WHERE id = $1`, [63])).toEqual([{ id: 63 }]);
        await dataSource.query(`DELETE FROM "${SCHEMA}".fixture WHERE id IN (63, 64, 65, 66, 67, 68)`);
      });

      it('stores any text inlined into a message exactly as a parameter would (quotes, backslashes, any script)', async () => {
        await fc.assert(
          fc.asyncProperty(
            fc.array(
              fc.string({ unit: 'grapheme', maxLength: 40 }).filter((text) => !text.includes('\u0000')),
              { minLength: 1, maxLength: 8 },
            ),
            async (texts) => {
              const ids = texts.map(() => randomUUID());
              const stored = await runWithTenant({ tenantId: tenantA }, () =>
                tenantTransaction(dataSource, async (manager) => {
                  for (const [index, text] of texts.entries())
                    await deferWrite(manager, insertEvent, [ids[index], 'app.tenant_id', text, `${text}\\'`, JSON.stringify({ text }), '{}']);
                  return manager.query(`SELECT id, type, key, payload FROM "${SCHEMA}".outbox WHERE id = ANY($1::uuid[])`, [ids]);
                }),
              );
              expect(new Map(stored.map((row: { id: string; type: string; key: string; payload: unknown }) => [row.id, [row.type, row.key, row.payload]]))).toEqual(
                new Map(texts.map((text, index) => [ids[index], [text, `${text}\\'`, { text }]])),
              );
            },
          ),
          { numRuns: 60 },
        );
      });
    });

    it('throws without a tenant context and never runs the work', async () => {
      const work = jest.fn(async () => 'ran');
      await expect(Promise.resolve().then(() => tenantTransaction(dataSource, work))).rejects.toThrow(MissingTenantContextError);
      expect(work).not.toHaveBeenCalled();
    });
  });

  describe('outbox', () => {
    it('hides an enqueued event from the relay until its transaction commits', async () => {
      const publisher = new RecordingPublisher();
      const relay = new OutboxRelay(dataSource, SCHEMA, publisher);
      const id = await runWithTenant({ tenantId: tenantA }, () =>
        dataSource.transaction(async (manager) => {
          const enqueued = await enqueueOutbox(manager, SCHEMA, event('uncommitted'));
          await relayPass(publisher);
          expect(publisher.published).toEqual([]);
          await expect(relay.backlog()).resolves.toBe(0);
          return enqueued;
        }),
      );
      await expect(relay.backlog()).resolves.toBe(1);
      await relayPass(publisher);
      expect(publisher.published.map((message) => message.id)).toEqual([id]);
    });

    it('publishes nothing for a transaction that rolled back', async () => {
      const publisher = new RecordingPublisher();
      await expect(
        runWithTenant({ tenantId: tenantA }, () =>
          dataSource.transaction(async (manager) => {
            await enqueueOutbox(manager, SCHEMA, event('rolled-back'));
            throw new Error('the business write failed');
          }),
        ),
      ).rejects.toThrow('the business write failed');
      await relayPass(publisher);
      expect(publisher.published).toEqual([]);
      const [row] = await dataSource.query(`SELECT count(*)::int AS n FROM "${SCHEMA}".outbox`);
      expect(row.n).toBe(0);
    });

    it('publishes committed events in order with their stored tenant header and marks them published', async () => {
      const first = await enqueueCommitted(tenantA, { ...event('first', { n: 1, nested: { ok: true } }), headers: { 'x-extra': 'kept' } });
      const [second, third] = await runWithTenant({ tenantId: tenantB }, () =>
        dataSource.transaction(async (manager) => [await enqueueOutbox(manager, SCHEMA, event('second')), await enqueueOutbox(manager, SCHEMA, event('third'))]),
      );
      const publisher = new RecordingPublisher();
      const relay = new OutboxRelay(dataSource, SCHEMA, publisher);
      await expect(relay.backlog()).resolves.toBe(3);

      // Outside any tenant context, as the relay runs in production; in two messages (the lock and
      // the rows with the opening, the marks with the commit).
      const { messages } = await countingMessages(() => relayPass(publisher));
      expect(messages).toEqual([
        expect.stringMatching(new RegExp(`^START TRANSACTION;\\n${sentStatement('SELECT id, topic')}`)),
        expect.stringMatching(new RegExp(`^${sentStatement('UPDATE ')}.*;\\nCOMMIT$`, 's')),
      ]);

      expect(publisher.published).toEqual([
        {
          topic: 'fixture.events.v1',
          id: first,
          type: 'first',
          key: 'key-first',
          payload: { n: 1, nested: { ok: true } },
          headers: { [TENANT_HEADER]: tenantA, 'x-extra': 'kept' },
        },
        { topic: 'fixture.events.v1', id: second, type: 'second', key: 'key-second', payload: { type: 'second' }, headers: { [TENANT_HEADER]: tenantB } },
        { topic: 'fixture.events.v1', id: third, type: 'third', key: 'key-third', payload: { type: 'third' }, headers: { [TENANT_HEADER]: tenantB } },
      ]);
      await expect(relay.backlog()).resolves.toBe(0);
      await expect(unpublishedIds()).resolves.toEqual([]);

      await relayPass(publisher);
      expect(publisher.published).toHaveLength(3);
    });

    it('keeps every event of a pass whose publish failed for the next pass, so none is lost', async () => {
      const ids = [await enqueueCommitted(tenantA, event('a')), await enqueueCommitted(tenantA, event('poison')), await enqueueCommitted(tenantA, event('c'))];
      const failing = new RecordingPublisher({ failOn: 'poison' });
      const errors: unknown[] = [];

      await relayPass(failing, { onError: (error) => errors.push(error) });

      expect(errors).toEqual([expect.objectContaining({ message: 'broker refused poison' })]);
      expect((await unpublishedIds()).sort()).toEqual([...ids].sort());
      const healthy = new RecordingPublisher();
      await relayPass(healthy);
      // At-least-once: the event published before the failure is published again, in order.
      expect(healthy.published.map((message) => message.id)).toEqual(ids);
      await expect(unpublishedIds()).resolves.toEqual([]);
    });

    it('publishes every event once and in order when two relays run together', async () => {
      const ids = await runWithTenant({ tenantId: tenantA }, () =>
        dataSource.transaction(async (manager) => {
          const enqueued: string[] = [];
          for (let n = 0; n < 120; n++) enqueued.push(await enqueueOutbox(manager, SCHEMA, event(`e${n}`)));
          return enqueued;
        }),
      );
      const publisher = new RecordingPublisher({ delayMs: 1 });
      const relays = [0, 1].map(() => new OutboxRelay(dataSource, SCHEMA, publisher, { batchSize: 10, pollIntervalMs: 20 }));

      relays.forEach((relay) => relay.start());
      await waitFor(async () => (await relays[0].backlog()) === 0, 20_000);
      await Promise.all(relays.map((relay) => relay.stop()));

      // One relay publishes at a time, so the stream is exactly the written order, without repeats.
      expect(publisher.published.map((message) => message.id)).toEqual(ids);
    });

    it('counts unpublished events of every tenant as backlog', async () => {
      const relay = new OutboxRelay(dataSource, SCHEMA, new RecordingPublisher());
      await expect(relay.backlog()).resolves.toBe(0);
      await enqueueCommitted(tenantA, event('a'));
      await enqueueCommitted(tenantB, event('b'));
      await expect(relay.backlog()).resolves.toBe(2);
      await relayPass(new RecordingPublisher());
      await expect(relay.backlog()).resolves.toBe(0);
    });

    it('opens sealed events of several tenants in one pass, and publishes up to the first one it cannot open', async () => {
      for (const statement of dataKeysTableSql(SCHEMA)) await dataSource.query(statement.replace(/^CREATE (TABLE|INDEX|UNIQUE INDEX) /, 'CREATE $1 IF NOT EXISTS '));
      const keys = new LocalKeyProvider(KeyEncryptionKey.generate());
      const cipher = new RecordCipher(SCHEMA, keys);
      const sealedEvent = (tenantId: string, type: string): Promise<string> =>
        runWithTenant({ tenantId }, () => dataSource.transaction((manager) => enqueueOutbox(manager, SCHEMA, event(type, { type, secret: tenantId }), cipher)));
      // Four tenants' keys, none cached by the relay's cipher (a fresh one, as in a freshly started replica): each is read during the pass.
      const [tenantC, tenantD, tenantE] = [randomUUID(), randomUUID(), randomUUID()];
      const first = await sealedEvent(tenantC, 'first');
      const second = await sealedEvent(tenantD, 'second');
      const between = await sealedEvent(tenantE, 'between');
      const third = await sealedEvent(randomUUID(), 'third');
      const fourth = await sealedEvent(tenantC, 'fourth');
      const stored = async (id: string): Promise<string> => (await dataSource.query(`SELECT payload FROM "${SCHEMA}".outbox WHERE id = $1`, [id]))[0].payload;
      expect(JSON.stringify(await stored(first))).not.toContain(tenantC);
      // The third row gets the fourth's ciphertext: sealed for another record, it cannot be opened as this one.
      await dataSource.query(`UPDATE "${SCHEMA}".outbox SET payload = to_jsonb($2::text) WHERE id = $1`, [third, await stored(fourth)]);
      // Counts queries overlapping on one connection (pg deprecates them, and pg 9 refuses them).
      let overlapping = 0;
      let runners = 0;
      const createQueryRunner = dataSource.createQueryRunner.bind(dataSource);
      const spy = jest.spyOn(dataSource, 'createQueryRunner').mockImplementation((mode) => {
        const runner = createQueryRunner(mode);
        runners += 1;
        const query = runner.query.bind(runner);
        let inFlight = 0;
        runner.query = (async (...args: Parameters<typeof query>) => {
          if (inFlight > 0) overlapping += 1;
          inFlight += 1;
          try {
            return await query(...args);
          } finally {
            inFlight -= 1;
          }
        }) as typeof runner.query;
        return runner;
      });
      const errors: unknown[] = [];
      const publisher = new RecordingPublisher();
      try {
        await relayPass(publisher, { cipher: new RecordCipher(SCHEMA, keys), onError: (error) => errors.push(error) });
      } finally {
        spy.mockRestore();
      }
      expect(publisher.published.map((message) => [message.id, message.payload])).toEqual([
        [first, { type: 'first', secret: tenantC }],
        [second, { type: 'second', secret: tenantD }],
        [between, { type: 'between', secret: tenantE }],
      ]);
      expect(errors).toHaveLength(1);
      expect((await unpublishedIds()).sort()).toEqual([third, fourth].sort());
      expect(runners).toBeGreaterThan(0);
      expect(overlapping).toBe(0);
    });

    it('delivers a relayed event through a real bus with the row id as message id and the stored tenant restored', async () => {
      const broker = new InProcessBroker();
      const bus = new InProcessBus(broker);
      const received: Array<{ message: IncomingMessage; tenantId: string }> = [];
      bus.subscribe('fixture.events.v1', 'fixture-consumer', async (message) => {
        received.push({ message, tenantId: currentTenant().tenantId });
      });
      await bus.start();
      try {
        const id = await enqueueCommitted(tenantB, event('through-the-bus', { hello: 'world' }));
        const relay = new OutboxRelay(dataSource, SCHEMA, bus, { pollIntervalMs: 20 });
        relay.start();
        await waitFor(async () => received.length > 0, 5_000);
        await relay.stop();
        expect(received).toEqual([{ message: expect.objectContaining({ id, type: 'through-the-bus', payload: { hello: 'world' } }), tenantId: tenantB }]);
      } finally {
        await bus.close();
      }
    });
  });

  describe('markProcessed', () => {
    it('returns true the first time a consumer records a message and false for every repeat', async () => {
      const messageId = randomUUID();
      const record = (consumer: string): Promise<boolean> => dataSource.transaction((manager) => markProcessed(manager, SCHEMA, consumer, messageId));
      await expect(record('runner')).resolves.toBe(true);
      await expect(record('runner')).resolves.toBe(false);
      await expect(record('runner')).resolves.toBe(false);
      await expect(record('auditor')).resolves.toBe(true);
    });

    it('forgets the record when the transaction that made it rolls back', async () => {
      const messageId = randomUUID();
      await expect(
        dataSource.transaction(async (manager) => {
          await expect(markProcessed(manager, SCHEMA, 'runner', messageId)).resolves.toBe(true);
          throw new Error('the effect failed');
        }),
      ).rejects.toThrow('the effect failed');
      await expect(dataSource.transaction((manager) => markProcessed(manager, SCHEMA, 'runner', messageId))).resolves.toBe(true);
    });
  });
});

function withDeadline<T>(promise: Promise<T>, timeoutMs: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no outcome within ${timeoutMs} ms`)), timeoutMs);
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}

async function waitFor(condition: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
