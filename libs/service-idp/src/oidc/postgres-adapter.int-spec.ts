import { DataSource } from 'typeorm';
import { createTestDatabase, TestDatabase } from '@mission/persistence';
import { openIdentityDatabase } from '../identity-database';
import { ClientDirectory } from './client-directory';
import { artefactKey, createPostgresAdapter, sweepExpired } from './postgres-adapter';

const ADMIN_URL = process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

describe('oidc-provider storage on PostgreSQL', () => {
  let database: TestDatabase;
  let dataSource: DataSource;
  let Adapter: ReturnType<typeof createPostgresAdapter>;

  beforeAll(async () => {
    database = await createTestDatabase(ADMIN_URL, 'oidc_store');
    dataSource = await openIdentityDatabase(database.url);
    Adapter = createPostgresAdapter(dataSource, new ClientDirectory({ findById: async () => null }, { clientId: 'op', secretHash: 'scrypt$x' }));
  });

  afterAll(async () => {
    await dataSource?.destroy();
    await database?.drop();
  });

  it('keeps a refresh token findable by its value but stores neither the value nor anything that equals it', async () => {
    const tokens = new Adapter('RefreshToken');
    const value = 'rt-value-that-is-a-credential';
    await tokens.upsert(value, { jti: value, grantId: 'g1', kind: 'RefreshToken', exp: 1 }, 60);
    await expect(tokens.find(value)).resolves.toMatchObject({ jti: value, grantId: 'g1' });
    const [row] = await dataSource.query(`SELECT key, payload::text AS payload FROM identity.oidc_artefacts WHERE model = 'RefreshToken'`);
    expect(row.key).toBe(artefactKey('RefreshToken', value));
    expect(`${row.key}${row.payload}`).not.toContain(value);
  });

  it('marks consumption and revokes a grant’s tokens together', async () => {
    const tokens = new Adapter('RefreshToken');
    await tokens.upsert('a', { jti: 'a', grantId: 'family' }, 60);
    await tokens.upsert('b', { jti: 'b', grantId: 'family' }, 60);
    await tokens.upsert('c', { jti: 'c', grantId: 'other' }, 60);
    await tokens.consume('a');
    expect((await tokens.find('a'))?.consumed).toEqual(expect.any(Number));
    await tokens.revokeByGrantId('family');
    await expect(tokens.find('a')).resolves.toBeUndefined();
    await expect(tokens.find('b')).resolves.toBeUndefined();
    await expect(tokens.find('c')).resolves.toBeDefined();
  });

  it('finds sessions by uid, forgets expired artefacts and sweeps them away', async () => {
    const sessions = new Adapter('Session');
    await sessions.upsert('session-id', { jti: 'session-id', uid: 'uid-1', accountId: 'u' }, 60);
    await expect(sessions.findByUid('uid-1')).resolves.toMatchObject({ jti: 'session-id', accountId: 'u' });
    await sessions.upsert('old', { jti: 'old', uid: 'uid-old' }, 1);
    await dataSource.query(`UPDATE identity.oidc_artefacts SET expires_at = clock_timestamp() - interval '1 second' WHERE uid = 'uid-old'`);
    await expect(sessions.find('old')).resolves.toBeUndefined();
    expect(await sweepExpired(dataSource)).toBeGreaterThanOrEqual(1);
    await sessions.destroy('session-id');
    await expect(sessions.findByUid('uid-1')).resolves.toBeUndefined();
  });

  it('refuses to write clients, which come from provisioning', async () => {
    await expect(new Adapter('Client').upsert('x', {})).rejects.toThrow(/provisioned/);
  });
});
