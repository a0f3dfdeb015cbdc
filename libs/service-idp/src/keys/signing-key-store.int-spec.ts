import { createLocalJWKSet, importJWK, jwtVerify, SignJWT } from 'jose';
import { DataSource } from 'typeorm';
import { KeyEncryptionKey } from '@mission/crypto';
import { createTestDatabase, TestDatabase } from '@mission/persistence';
import { openIdentityDatabase } from '../identity-database';
import { generateSigningKey, SigningKey } from './idp-keys';
import { RotationPolicy } from './key-rotation';
import { SigningKeyStore } from './signing-key-store';

const ADMIN_URL = process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const MINUTE = 60_000;
const policy: RotationPolicy = { publishDelayMs: 10 * MINUTE, retireAfterMs: 61 * MINUTE };

function publicJwks(keys: readonly SigningKey[]) {
  return { keys: keys.map(({ d: _d, ...publicPart }) => publicPart) };
}

async function sign(key: SigningKey): Promise<string> {
  return new SignJWT({ sub: 'client' })
    .setProtectedHeader({ alg: 'ES256', kid: key.kid })
    .setIssuedAt()
    .sign(await importJWK(key, 'ES256'));
}

describe('signing keys in identity.signing_keys', () => {
  let database: TestDatabase;
  let dataSource: DataSource;
  let now: number;
  const kek = KeyEncryptionKey.generate();
  const store = (key = kek) => new SigningKeyStore(dataSource, key, policy, () => new Date(now));

  beforeAll(async () => {
    database = await createTestDatabase(ADMIN_URL, 'signing_keys');
    dataSource = await openIdentityDatabase(database.url);
  });

  beforeEach(async () => {
    now = Date.parse('2026-01-01T00:00:00Z');
    await dataSource.query('DELETE FROM identity.signing_keys');
  });

  afterAll(async () => {
    await dataSource?.destroy();
    await database?.drop();
  });

  it('stores private keys only encrypted: no "d" value (nor any private component) in the clear', async () => {
    await store().initialize();
    await store().rotate();
    const { keys } = await store().load();
    expect(keys).toHaveLength(2);
    const dump = JSON.stringify(await dataSource.query('SELECT * FROM identity.signing_keys'));
    for (const key of keys) {
      expect(dump).not.toContain(key.d);
      expect(dump).not.toContain(Buffer.from(key.d, 'base64url').toString('hex'));
    }
    expect(dump).not.toContain('"d"');
    // Moving one key's ciphertext to another row fails authentication (the kid is bound in).
    const [first, second] = await dataSource.query('SELECT kid, private_jwk FROM identity.signing_keys ORDER BY created_at');
    await dataSource.query('UPDATE identity.signing_keys SET private_jwk = $2 WHERE kid = $1', [second.kid, first.private_jwk]);
    await expect(store().load()).rejects.toThrow(/failed authentication/);
  });

  it('refuses to load with another key-encryption key', async () => {
    await store().initialize();
    await expect(store(KeyEncryptionKey.generate()).load()).rejects.toThrow(/failed authentication/);
  });

  it('imports the plain keys of an earlier version once, first one signing', async () => {
    const [a, b] = [generateSigningKey(), generateSigningKey()];
    await expect(store().initialize([a, b])).resolves.toBe('imported');
    await expect(store().initialize([generateSigningKey()])).resolves.toBe('existing');
    const { keys, timeline } = await store().load();
    expect(keys.map((key) => key.kid)).toEqual([a.kid, b.kid]);
    expect(keys[0]).toEqual(a);
    expect(timeline.map((key) => key.state)).toEqual(['signing', 'retiring']);
  });

  it('publishes a rotated key before it signs, keeps old tokens verifiable until they expire, then retires the old key', async () => {
    await expect(store().initialize()).resolves.toBe('generated');
    const original = (await store().load()).keys[0] as SigningKey;
    const oldToken = await sign(original);

    const rotation = await store().rotate();
    expect(rotation).toMatchObject({ rotated: true, activatesAt: new Date(now + 10 * MINUTE) });
    await expect(store().rotate()).resolves.toMatchObject({ rotated: false, reason: 'rotation_pending' });

    // Published, not signing yet.
    let set = await store().load();
    expect(set.keys.map((key) => key.kid)).toEqual([original.kid, rotation.rotated && rotation.kid]);
    expect(set.nextChangeAt).toEqual(new Date(now + 10 * MINUTE));

    now += 10 * MINUTE;
    set = await store().load();
    const [signing] = set.keys;
    expect(signing?.kid).toBe(rotation.rotated && rotation.kid);
    expect(set.keys.map((key) => key.kid)).toContain(original.kid);
    // A token of the old key and one of the new key both verify against the published set.
    await expect(jwtVerify(oldToken, createLocalJWKSet(publicJwks(set.keys)))).resolves.toBeDefined();
    await expect(jwtVerify(await sign(signing as SigningKey), createLocalJWKSet(publicJwks(set.keys)))).resolves.toBeDefined();

    now += 61 * MINUTE - 1;
    expect((await store().load()).keys).toHaveLength(2);
    now += 1;
    set = await store().load();
    expect(set.keys.map((key) => key.kid)).toEqual([signing?.kid]);
    // The retired key's private part is gone from the database.
    const [retired] = await dataSource.query('SELECT state, private_jwk FROM identity.signing_keys WHERE kid = $1', [original.kid]);
    expect(retired).toEqual({ state: 'retired', private_jwk: null });
  });

  it('lets replicas advance and rotate together without two signing keys', async () => {
    await store().initialize();
    await Promise.all([store().rotate(), store().rotate(), store().rotate()]);
    now += 10 * MINUTE;
    await Promise.all([store().load(), store().load(), store().load()]);
    const states = await dataSource.query(`SELECT state, count(*)::int AS n FROM identity.signing_keys GROUP BY state ORDER BY state`);
    expect(states).toEqual([
      { state: 'retiring', n: 1 },
      { state: 'signing', n: 1 },
    ]);
  });
});
