import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { CreatedTenantView, ErrorCode, MessageTypes, TENANT_SCOPES, Topics } from '@mission/contracts';
import { InProcessBroker, InProcessBus } from '@mission/messaging';
import { createTestDatabase, TestDatabase } from '@mission/persistence';
import { hashSecret } from '@mission/crypto';
import { verifyClientSecret } from '../clients/client-credentials';
import { ClientsRepository } from '../clients/clients.repository';
import { openIdentityDatabase } from '../identity-database';
import { identityRequestHandlers } from './tenants.handlers';
import { TenantsRepository } from './tenants.repository';
import { TenantsService } from './tenants.service';
import { domainErrorOf } from '@mission/messaging/testing';

const ADMIN_URL = process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

describe('tenants on PostgreSQL', () => {
  let database: TestDatabase;
  let dataSource: DataSource;
  let clients: ClientsRepository;
  let tenants: TenantsService;

  beforeAll(async () => {
    database = await createTestDatabase(ADMIN_URL, 'idp_test');
    dataSource = await openIdentityDatabase(database.url);
    clients = new ClientsRepository(dataSource);
    tenants = new TenantsService(dataSource, new TenantsRepository(dataSource), clients);
  });

  afterAll(async () => {
    await dataSource?.destroy();
    await database?.drop();
  });

  it('creates the identity schema through its migrations, once', async () => {
    const tables = await dataSource.query(`SELECT table_name FROM information_schema.tables WHERE table_schema = 'identity' ORDER BY table_name`);
    expect(tables.map((row: { table_name: string }) => row.table_name)).toEqual(['clients', 'migrations', 'oidc_artefacts', 'signing_keys', 'tenants', 'users']);
    const again = await openIdentityDatabase(database.url);
    try {
      const applied = await again.query(`SELECT name FROM identity.migrations ORDER BY id`);
      expect(applied).toEqual([
        { name: 'CreateIdentity1763769600000' },
        { name: 'CreateUsers1764460800000' },
        { name: 'CreateOidcStore1764633600000' },
        { name: 'CreateSigningKeys1764806400000' },
        { name: 'TenantStorageQuota1766793600000' },
      ]);
    } finally {
      await again.destroy();
    }
  });

  it('creates a tenant with one client holding every tenant scope, and shows the secret once', async () => {
    const created = await tenants.create({ name: 'Acme', tier: 'business' });
    expect(created).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      name: 'Acme',
      tier: 'business',
      rpm: 500,
      storage: { documents: 10_000, bytes: 1024 * 1024 * 1024 },
      createdAt: expect.any(String),
      client: { clientId: expect.stringMatching(/^cl_[0-9a-f]{32}$/), clientSecret: expect.any(String), scopes: [...TENANT_SCOPES] },
    });
    await expect(tenants.get(created.id)).resolves.toEqual({
      id: created.id,
      name: 'Acme',
      tier: 'business',
      rpm: 500,
      storage: { documents: 10_000, bytes: 1024 * 1024 * 1024 },
      createdAt: created.createdAt,
    });
  });

  it('keeps an enterprise tenant’s own limit', async () => {
    const created = await tenants.create({ name: 'Big', tier: 'enterprise', rpm: 12_345 });
    expect(created.rpm).toBe(12_345);
    await expect(tenants.get(created.id)).resolves.toMatchObject({ tier: 'enterprise', rpm: 12_345 });
  });

  it('stores the client secret only as an scrypt hash that verifies it', async () => {
    const created = await tenants.create({ name: 'Hashed', tier: 'starter' });
    const { clientId, clientSecret } = created.client;
    const [row] = await dataSource.query(`SELECT row_to_json(c)::text AS json, secret_hash FROM identity.clients c WHERE client_id = $1`, [clientId]);
    expect(row.json).not.toContain(clientSecret);
    expect(row.secret_hash).toMatch(/^scrypt\$/);
    await expect(verifyClientSecret(clientSecret, row.secret_hash)).resolves.toBe(true);
    await expect(verifyClientSecret(`${clientSecret}x`, row.secret_hash)).resolves.toBe(false);

    const stored = await clients.findById(clientId);
    expect(stored).toMatchObject({ clientId, tenantId: created.id, scopes: [...TENANT_SCOPES] });
  });

  it('refuses to store anything but a hash as a secret', async () => {
    const { id } = await tenants.create({ name: 'Guarded', tier: 'starter' });
    // A plain pg client: the failure is the point, and TypeORM would log it as an error.
    const client = new Client({ connectionString: database.url });
    await client.connect();
    try {
      await expect(
        client.query(`INSERT INTO identity.clients (client_id, tenant_id, secret_hash, scopes) VALUES ($1, $2, $3, $4)`, ['cl_plain', id, 'plain-secret', ['missions:read']]),
      ).rejects.toThrow(/clients_secret_hash_check/);
    } finally {
      await client.end();
    }
  });

  it('answers not found for an unknown id and for a malformed one', async () => {
    for (const id of [randomUUID(), 'not-a-uuid', "1' OR '1'='1", '00000000-0000-0000-0000-000000000000']) {
      const error = await domainErrorOf(tenants.get(id));
      expect(error.code).toBe(ErrorCode.NotFound);
      expect(error.message).toBe('Tenant not found');
    }
  });

  it('creates nothing when the client cannot be written', async () => {
    const failingClients = {
      insert: async () => {
        throw new Error('disk full');
      },
    } as unknown as ClientsRepository;
    const failing = new TenantsService(dataSource, new TenantsRepository(dataSource), failingClients);
    const [{ count: before }] = await dataSource.query(`SELECT count(*)::int AS count FROM identity.tenants`);
    await expect(failing.create({ name: 'Half', tier: 'starter' })).rejects.toThrow('disk full');
    const [{ count: after }] = await dataSource.query(`SELECT count(*)::int AS count FROM identity.tenants`);
    expect(after).toBe(before);
  });

  it('changes tier and limit under the creation rules', async () => {
    const { id } = await tenants.create({ name: 'Growing', tier: 'starter' });
    await expect(tenants.update(id, { tier: 'enterprise', rpm: 9_000 })).resolves.toMatchObject({ tier: 'enterprise', rpm: 9_000 });
    await expect(tenants.update(id, { rpm: 9_500 })).resolves.toMatchObject({ tier: 'enterprise', rpm: 9_500 });
    await expect(tenants.update(id, { tier: 'business' })).resolves.toMatchObject({ tier: 'business', rpm: 500 });
    const [row] = await dataSource.query(`SELECT tier, rpm FROM identity.tenants WHERE id = $1`, [id]);
    expect(row).toEqual({ tier: 'business', rpm: null });
    expect((await domainErrorOf(tenants.update(id, { tier: 'enterprise' }))).errors).toEqual([{ field: 'rpm', message: 'rpm is required for the enterprise tier' }]);
    expect((await domainErrorOf(tenants.update(id, { rpm: 5 }))).code).toBe(ErrorCode.ValidationFailed);
    expect((await domainErrorOf(tenants.update(randomUUID(), { tier: 'business' }))).code).toBe(ErrorCode.NotFound);
  });

  it('stores a user with the password hash it was given, unique per tenant regardless of case', async () => {
    const { id } = await tenants.create({ name: 'People', tier: 'starter' });
    const passwordHash = await hashSecret('correct horse battery staple');
    const user = await tenants.createUser(id, { username: 'Grace', passwordHash });
    expect(user).toEqual({ id: expect.any(String), tenantId: id, username: 'grace', scopes: [...TENANT_SCOPES], createdAt: expect.any(String) });
    const [row] = await dataSource.query(`SELECT password_hash FROM identity.users WHERE id = $1`, [user.id]);
    expect(row.password_hash).toBe(passwordHash);
    expect((await domainErrorOf(tenants.createUser(id, { username: 'GRACE', passwordHash }))).code).toBe(ErrorCode.Conflict);
    expect((await domainErrorOf(tenants.createUser(id, { username: 'plain', passwordHash: 'hunter2hunter2' }))).code).toBe(ErrorCode.ValidationFailed);
    expect((await domainErrorOf(tenants.createUser(randomUUID(), { username: 'x', passwordHash }))).code).toBe(ErrorCode.NotFound);
  });

  it('creates further clients with a scope subset and sign-in redirect URIs', async () => {
    const { id } = await tenants.create({ name: 'Apps', tier: 'starter' });
    const client = await tenants.createClient(id, { scopes: ['missions:read'], redirectUris: ['http://127.0.0.1:9/cb'] });
    expect(client).toMatchObject({ scopes: ['missions:read'], redirectUris: ['http://127.0.0.1:9/cb'] });
    await expect(clients.findById(client.clientId)).resolves.toMatchObject({ tenantId: id, scopes: ['missions:read'], redirectUris: ['http://127.0.0.1:9/cb'] });
  });

  it('serves create and get over the bus, with validation and not-found as domain errors', async () => {
    const broker = new InProcessBroker();
    const server = new InProcessBus(broker);
    server.serve(
      Topics.identityRequests,
      'idp',
      identityRequestHandlers(tenants, () => Promise.reject(new Error('not rotated in this test'))),
      { tenancy: 'operator' },
    );
    const caller = new InProcessBus(broker);
    await server.start();
    await caller.start();
    try {
      const created = await caller.request<CreatedTenantView>(Topics.identityRequests, MessageTypes.tenantCreate, { name: 'Via bus', tier: 'professional' });
      expect(created).toMatchObject({ name: 'Via bus', tier: 'professional', rpm: 2000, client: { scopes: [...TENANT_SCOPES] } });
      await expect(caller.request(Topics.identityRequests, MessageTypes.tenantGet, { id: created.id })).resolves.toMatchObject({ id: created.id });

      const invalid = await domainErrorOf(caller.request(Topics.identityRequests, MessageTypes.tenantCreate, { name: 'X', tier: 'starter', rpm: 5 }));
      expect(invalid.code).toBe(ErrorCode.ValidationFailed);
      expect(invalid.errors).toEqual([{ field: 'rpm', message: 'rpm can only be set for the enterprise tier' }]);

      const missing = await domainErrorOf(caller.request(Topics.identityRequests, MessageTypes.tenantGet, { id: 'nope' }));
      expect(missing.code).toBe(ErrorCode.NotFound);
    } finally {
      await caller.close();
      await server.close();
    }
  });
});
