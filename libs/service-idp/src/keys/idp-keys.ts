import { createHash, generateKeyPairSync, randomBytes } from 'node:crypto';
import path from 'node:path';
import { z } from 'zod';
import { ensurePrivateDirectory, readOrCreateSecretFile } from './secret-file';

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

export interface IdpKeys {
  /** Private JWKS for the provider; the first key signs. */
  readonly jwks: { readonly keys: readonly SigningKey[] };
  /** Keys that sign the provider's cookies; the first one signs, all verify. */
  readonly cookieKeys: readonly string[];
  /** Names of the files created by this call (empty on every later start). */
  readonly created: readonly string[];
}

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

/**
 * The provider's signing and cookie keys, generated on first start and kept under
 * `<dataDir>/idp` so that tokens and cookies stay valid across restarts.
 */
export async function loadIdpKeys(dataDir: string): Promise<IdpKeys> {
  const directory = path.join(dataDir, 'idp');
  await ensurePrivateDirectory(directory);
  const signing = await readOrCreateSecretFile(
    path.join(directory, 'signing-keys.json'),
    (raw) => SigningKeysFileSchema.parse(raw),
    () => ({ keys: [generateSigningKey()] }),
  );
  const cookies = await readOrCreateSecretFile(
    path.join(directory, 'cookie-keys.json'),
    (raw) => CookieKeysFileSchema.parse(raw),
    () => ({ keys: [randomBytes(32).toString('base64url')] }),
  );
  return {
    jwks: signing.value,
    cookieKeys: cookies.value.keys,
    created: [...(signing.created ? ['signing-keys.json'] : []), ...(cookies.created ? ['cookie-keys.json'] : [])],
  };
}
