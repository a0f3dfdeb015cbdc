import { createHash, generateKeyPairSync, randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { ensurePrivateDirectory, readOrCreateSecretFile, readSecretFile } from '@mission/crypto';

/** Access tokens are signed with this asymmetric algorithm only (the gateway refuses HMAC). */
export const SIGNING_ALGORITHM = 'ES256';

const base64url = z.string().regex(/^[A-Za-z0-9_-]+$/);

const SigningKeySchema = z.strictObject({
  kty: z.literal('EC'),
  crv: z.literal('P-256'),
  x: base64url,
  y: base64url,
  d: base64url,
  kid: base64url,
  alg: z.literal(SIGNING_ALGORITHM),
  use: z.literal('sig'),
});
export type SigningKey = z.output<typeof SigningKeySchema>;

const SigningKeysFileSchema = z.strictObject({ keys: z.array(SigningKeySchema).min(1) });
const CookieKeysFileSchema = z.strictObject({ keys: z.array(z.string().min(32)).min(1) });
const KeyEncryptionKeyFileSchema = z.strictObject({ key: base64url.length(43) });

/** RFC 7638 thumbprint of an EC public key: a stable `kid` derived from the key itself. */
export function ecThumbprint(jwk: Pick<SigningKey, 'crv' | 'kty' | 'x' | 'y'>): string {
  const canonical = JSON.stringify({ crv: jwk.crv, kty: jwk.kty, x: jwk.x, y: jwk.y });
  return createHash('sha256').update(canonical).digest('base64url');
}

export function generateSigningKey(): SigningKey {
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const jwk = privateKey.export({ format: 'jwk' });
  const { x, y, d } = z.object({ x: base64url, y: base64url, d: base64url }).parse(jwk);
  const publicPart = { kty: 'EC' as const, crv: 'P-256' as const, x, y };
  return { ...publicPart, d, kid: ecThumbprint(publicPart), alg: SIGNING_ALGORITHM, use: 'sig' };
}

export const LEGACY_SIGNING_KEYS_FILE = 'signing-keys.json';
export const KEY_ENCRYPTION_KEY_FILE = 'key-encryption.key';

export function parseSigningKey(raw: unknown): SigningKey {
  return SigningKeySchema.parse(raw);
}

/** The keys that sign the provider's cookies (first signs, all verify), generated once under `<dataDir>/idp`. */
export async function loadCookieKeys(dataDir: string): Promise<{ readonly keys: readonly string[]; readonly created: boolean }> {
  const directory = path.join(dataDir, 'idp');
  await ensurePrivateDirectory(directory);
  const cookies = await readOrCreateSecretFile(
    path.join(directory, 'cookie-keys.json'),
    (raw) => CookieKeysFileSchema.parse(raw),
    () => ({ keys: [randomBytes(32).toString('base64url')] }),
  );
  return { keys: cookies.value.keys, created: cookies.created };
}

/**
 * The key-encryption key of the embedded mode: the configured one, or one generated on the first
 * start into `<dataDir>/idp/key-encryption.key` (mode 0600). Losing it makes the stored signing
 * keys unreadable (the idp then refuses to start rather than replace them).
 */
export async function resolveKeyEncryptionKey(configured: string | undefined, dataDir: string): Promise<{ readonly key: string; readonly created: boolean }> {
  if (configured) return { key: configured, created: false };
  const directory = path.join(dataDir, 'idp');
  await ensurePrivateDirectory(directory);
  const file = await readOrCreateSecretFile(
    path.join(directory, KEY_ENCRYPTION_KEY_FILE),
    (raw) => KeyEncryptionKeyFileSchema.parse(raw),
    () => ({ key: randomBytes(32).toString('base64url') }),
  );
  return { key: file.value.key, created: file.created };
}

/** Signing keys an earlier version kept in plain `<dataDir>/idp/signing-keys.json`, if that file is still there. */
export async function readLegacySigningKeys(dataDir: string): Promise<readonly SigningKey[] | undefined> {
  return (await readSecretFile(path.join(dataDir, 'idp', LEGACY_SIGNING_KEYS_FILE), (raw) => SigningKeysFileSchema.parse(raw)))?.keys;
}

/** Removes the plain key file once its keys are stored encrypted. */
export async function removeLegacySigningKeys(dataDir: string): Promise<void> {
  await fs.rm(path.join(dataDir, 'idp', LEGACY_SIGNING_KEYS_FILE), { force: true });
}
