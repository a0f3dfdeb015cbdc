import { DataSource } from 'typeorm';
import { createTestDatabase, TestDatabase } from '@mission/persistence';
import { openIdentityDatabase } from '../identity-database';
import { ClientDirectory } from './client-directory';
import { artefactKey, createPostgresAdapter, CredentialReusedError, sweepExpired } from './postgres-adapter';

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

  it('lets exactly one of two racing consumptions win, and revokes the grant for the other (reuse detection)', async () => {
    const tokens = new Adapter('RefreshToken');
    const grants = new Adapter('Grant');
    for (let round = 0; round < 10; round += 1) {
      const grantId = `race-${round}`;
      await grants.upsert(grantId, { jti: grantId, accountId: 'u' }, 60);
      await tokens.upsert(`rt-${round}`, { jti: `rt-${round}`, grantId }, 60);
      await tokens.upsert(`sibling-${round}`, { jti: `sibling-${round}`, grantId }, 60);
      const outcomes = await Promise.allSettled([tokens.consume(`rt-${round}`), tokens.consume(`rt-${round}`)]);
      expect(outcomes.filter((outcome) => outcome.status === 'fulfilled')).toHaveLength(1);
      const [refused] = outcomes.filter((outcome): outcome is PromiseRejectedResult => outcome.status === 'rejected');
      expect(refused?.reason).toBeInstanceOf(CredentialReusedError);
      expect(refused?.reason).toMatchObject({ message: 'invalid_grant', expose: true, statusCode: 400, error_description: 'refresh token already used' });
      await expect(tokens.find(`sibling-${round}`)).resolves.toBeUndefined();
      await expect(grants.find(grantId)).resolves.toBeUndefined();
    }
  });

  it('refuses a consumed code again and revokes what its grant issued; other grants keep theirs', async () => {
    const codes = new Adapter('AuthorizationCode');
    const tokens = new Adapter('AccessToken');
    await codes.upsert('code-1', { jti: 'code-1', grantId: 'g-code' }, 60);
    await tokens.upsert('at-1', { jti: 'at-1', grantId: 'g-code' }, 60);
    await tokens.upsert('at-2', { jti: 'at-2', grantId: 'g-else' }, 60);
    await codes.consume('code-1');
    await expect(tokens.find('at-1')).resolves.toBeDefined();
    await expect(codes.consume('code-1')).rejects.toMatchObject({ error_description: 'authorization code already consumed' });
    await expect(tokens.find('at-1')).resolves.toBeUndefined();
    await expect(tokens.find('at-2')).resolves.toBeDefined();
    // One that never existed (or expired) is not consumable either.
    await expect(codes.consume('never-issued')).rejects.toBeInstanceOf(CredentialReusedError);
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
