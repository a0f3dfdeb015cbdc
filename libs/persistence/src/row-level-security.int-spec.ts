import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { DataSource, MigrationInterface, QueryRunner } from 'typeorm';
import { runWithTenant } from '@mission/tenant-context';
import { openServiceDatabase, tenantTransaction } from './database';
import { createServiceRole, enableTenantRls, serviceRoleName } from './row-level-security';
import { createTestDatabase, TestDatabase } from './test-database';

const ADMIN_URL = process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const SCHEMA = 'rls_fixture';

class CreateNotes1700000000000 implements MigrationInterface {
  name = 'CreateNotes1700000000000';
  async up(queryRunner: QueryRunner): Promise<void> {
    // tenant_id starts nullable on purpose: enableTenantRls makes it NOT NULL.
    await queryRunner.query(`CREATE TABLE ${SCHEMA}.notes (id uuid PRIMARY KEY, tenant_id uuid, body text NOT NULL)`);
    await createServiceRole(queryRunner, SCHEMA);
    await enableTenantRls(queryRunner, SCHEMA, 'notes');
  }
  async down(): Promise<void> {
    // not needed for a throwaway database
  }
}

describe('row-level security helpers', () => {
  let database: TestDatabase;
  let dataSource: DataSource;
  const tenantA = randomUUID();
  const tenantB = randomUUID();
  const open = (serviceRole?: string) =>
    openServiceDatabase({ url: database.url, schema: SCHEMA, entities: [], migrations: [CreateNotes1700000000000], applicationName: 'rls-test', serviceRole });
  const inTenant = <T>(tenantId: string, sql: string, parameters: unknown[] = []) =>
    runWithTenant({ tenantId }, () => tenantTransaction(dataSource, (manager) => manager.query(sql, parameters) as Promise<T>));

  beforeAll(async () => {
    database = await createTestDatabase(ADMIN_URL, 'rls_test');
    dataSource = await open(serviceRoleName(SCHEMA));
    await inTenant(tenantA, `INSERT INTO ${SCHEMA}.notes VALUES ($1, $2, 'a')`, [randomUUID(), tenantA]);
    await inTenant(tenantB, `INSERT INTO ${SCHEMA}.notes VALUES ($1, $2, 'b')`, [randomUUID(), tenantB]);
  });

  afterAll(async () => {
    await dataSource?.destroy();
    await database?.drop();
  });

  it('makes the tenant column NOT NULL and the table forced under RLS', async () => {
    const [column] = await dataSource.query(`SELECT is_nullable FROM information_schema.columns WHERE table_schema = $1 AND table_name = 'notes' AND column_name = 'tenant_id'`, [
      SCHEMA,
    ]);
    expect(column.is_nullable).toBe('NO');
  });

  it('answers a query without a tenant with nothing, and a tenant’s transaction with its own rows only', async () => {
    await expect(dataSource.query(`SELECT body FROM ${SCHEMA}.notes`)).resolves.toEqual([]);
    await expect(inTenant(tenantA, `SELECT body FROM ${SCHEMA}.notes`)).resolves.toEqual([{ body: 'a' }]);
    await expect(inTenant(tenantB, `SELECT body FROM ${SCHEMA}.notes`)).resolves.toEqual([{ body: 'b' }]);
  });

  it('answers each tenant with its own rows through a prepared statement, after PostgreSQL settles on a generic plan too', async () => {
    const select = `SELECT body FROM ${SCHEMA}.notes WHERE body = ANY($1::text[]) ORDER BY body`;
    const spy = jest.spyOn(Client.prototype, 'query');
    try {
      let executed = 0;
      for (let attempt = 0; executed < 16 && attempt < 400; attempt++) {
        const tenant = attempt % 2 === 0 ? tenantA : tenantB;
        spy.mockClear();
        await expect(inTenant(tenant, select, [['a', 'b']])).resolves.toEqual([{ body: tenant === tenantA ? 'a' : 'b' }]);
        if (spy.mock.calls.some(([text]) => typeof text === 'string' && /EXECUTE mission_\w+\('\{"a","b"\}'\)/.test(text))) executed++;
        // The probe that shows the statement prepares goes on its own, once.
        else await new Promise((resolve) => setTimeout(resolve, 10));
      }
      // Beyond PostgreSQL's five custom plans, both tenants alike.
      expect(executed).toBe(16);
    } finally {
      spy.mockRestore();
    }
  });

  it('answers each tenant with its own rows through one generic plan, kept on one connection', async () => {
    const name = new URL(database.url).pathname.slice(1);
    const owner = new Client({ connectionString: database.url });
    await owner.connect();
    // Every new session of the test database plans prepared statements generically, at once.
    await owner.query(`ALTER DATABASE "${name}" SET plan_cache_mode = force_generic_plan`);
    const single = await openServiceDatabase({
      url: database.url,
      schema: SCHEMA,
      entities: [],
      migrations: [CreateNotes1700000000000],
      applicationName: 'rls-test-generic',
      serviceRole: serviceRoleName(SCHEMA),
      poolSize: 1,
    });
    const select = `SELECT body FROM ${SCHEMA}.notes WHERE body <> ALL($1::text[]) ORDER BY body`;
    const inTenantOnOne = (tenantId: string) => runWithTenant({ tenantId }, () => tenantTransaction(single, (manager) => manager.query(select, [['c']])));
    try {
      let generic = 0;
      for (let attempt = 0; generic < 6 && attempt < 400; attempt++) {
        const tenant = attempt % 2 === 0 ? tenantA : tenantB;
        await expect(inTenantOnOne(tenant)).resolves.toEqual([{ body: tenant === tenantA ? 'a' : 'b' }]);
        const [plans] = await runWithTenant({ tenantId: tenant }, () =>
          tenantTransaction(single, (manager) =>
            manager.query(`SELECT coalesce(sum(generic_plans), 0)::int AS generic FROM pg_prepared_statements WHERE statement LIKE $1`, ['%<> ALL(%']),
          ),
        );
        generic = plans.generic;
        if (generic === 0) await new Promise((resolve) => setTimeout(resolve, 10));
      }
      // The same plan answered tenant A and tenant B, each with its own rows.
      expect(generic).toBeGreaterThanOrEqual(6);
    } finally {
      await single.destroy();
      await owner.query(`ALTER DATABASE "${name}" RESET plan_cache_mode`);
      await owner.end();
    }
  });

  it('forgets the tenant when the transaction ends, on the same pooled connection', async () => {
    await inTenant(tenantA, `SELECT 1`);
    await expect(dataSource.query(`SELECT body FROM ${SCHEMA}.notes`)).resolves.toEqual([]);
  });

  it('refuses to open a service DataSource on a role that bypasses row-level security', async () => {
    await expect(open('postgres')).rejects.toThrow(/bypasses row-level security|run as/);
  });
});
