import { createPrivateKey, createPublicKey, sign, verify } from 'node:crypto';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ecThumbprint, generateSigningKey, loadCookieKeys, readLegacySigningKeys, removeLegacySigningKeys, resolveKeyEncryptionKey, SIGNING_ALGORITHM } from './idp-keys';

describe('idp keys on disk', () => {
  let dataDir: string;

  beforeEach(async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), 'idp-keys-'));
  });

  afterEach(async () => {
    await rm(dataDir, { recursive: true, force: true });
  });

  it('generates cookie keys and the embedded key-encryption key once, owner-only, and keeps them across starts', async () => {
    const first = await loadCookieKeys(dataDir);
    const kek = await resolveKeyEncryptionKey(undefined, dataDir);
    expect([first.created, kek.created]).toEqual([true, true]);
    expect(Buffer.from(kek.key, 'base64url')).toHaveLength(32);
    expect((await stat(path.join(dataDir, 'idp'))).mode & 0o777).toBe(0o700);
    for (const file of ['cookie-keys.json', 'key-encryption.key']) {
      expect((await stat(path.join(dataDir, 'idp', file))).mode & 0o777).toBe(0o600);
    }

    const second = await loadCookieKeys(dataDir);
    expect(second).toEqual({ keys: first.keys, created: false });
    expect(await resolveKeyEncryptionKey(undefined, dataDir)).toEqual({ key: kek.key, created: false });
  });

  it('uses a configured key-encryption key without writing a file', async () => {
    await expect(resolveKeyEncryptionKey('configured', dataDir)).resolves.toEqual({ key: 'configured', created: false });
    await expect(stat(path.join(dataDir, 'idp', 'key-encryption.key'))).rejects.toThrow(/ENOENT/);
  });

  it('reads the plain signing keys of an earlier version until they are removed', async () => {
    await expect(readLegacySigningKeys(dataDir)).resolves.toBeUndefined();
    const key = generateSigningKey();
    await loadCookieKeys(dataDir);
    await writeFile(path.join(dataDir, 'idp', 'signing-keys.json'), JSON.stringify({ keys: [key] }));
    await expect(readLegacySigningKeys(dataDir)).resolves.toEqual([key]);
    await removeLegacySigningKeys(dataDir);
    await expect(readLegacySigningKeys(dataDir)).resolves.toBeUndefined();
  });

  it('names the signing key by its RFC 7638 thumbprint and produces a working P-256 key pair', async () => {
    const key = generateSigningKey();
    expect(key).toMatchObject({ kty: 'EC', crv: 'P-256', alg: SIGNING_ALGORITHM, use: 'sig' });
    expect(key.kid).toBe(ecThumbprint(key));

    const privateKey = createPrivateKey({ key, format: 'jwk' });
    const publicKey = createPublicKey({ key: { kty: key.kty, crv: key.crv, x: key.x, y: key.y }, format: 'jwk' });
    const signature = sign('sha256', Buffer.from('payload'), { key: privateKey, dsaEncoding: 'ieee-p1363' });
    expect(verify('sha256', Buffer.from('payload'), { key: publicKey, dsaEncoding: 'ieee-p1363' }, signature)).toBe(true);
  });

  it('computes the RFC 7638 thumbprint of the RFC 7517 (A.1) example EC key as jose does', () => {
    const jwk = { kty: 'EC' as const, crv: 'P-256' as const, x: 'f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU', y: 'x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0' };
    expect(ecThumbprint(jwk)).toBe('oKIywvGUpTVTyxMQ3bwIIeQUudfr_CkLMjCE19ECD-U');
  });

  it('refuses a damaged key file instead of silently ignoring the key', async () => {
    await loadCookieKeys(dataDir);
    const file = path.join(dataDir, 'idp', 'signing-keys.json');
    await writeFile(file, JSON.stringify({ keys: [{ kty: 'oct', k: 'x' }] }));
    await expect(readLegacySigningKeys(dataDir)).rejects.toThrow(`${file} is not a valid secret file`);
    expect(JSON.parse(await readFile(file, 'utf8'))).toEqual({ keys: [{ kty: 'oct', k: 'x' }] });
  });
});
