import { z } from 'zod';

const base64url = z.string().regex(/^[A-Za-z0-9_-]+$/);

/** Public keys only: a private member anywhere refuses the whole setting. */
const PublicKeySchema = z.union([
  z.strictObject({
    kty: z.literal('EC'),
    crv: z.enum(['P-256', 'P-384', 'P-521']),
    x: base64url,
    y: base64url,
    kid: base64url,
    alg: z.string().optional(),
    use: z.literal('sig').optional(),
  }),
  z.strictObject({ kty: z.literal('RSA'), n: base64url, e: base64url, kid: base64url, alg: z.string().optional(), use: z.literal('sig').optional() }),
]);
export type PublishedPublicKey = z.output<typeof PublicKeySchema>;

const PublishedKeysSchema = z.strictObject({ keys: z.array(PublicKeySchema).min(1).max(5) });

/**
 * `IDP_TEST_PUBLISHED_KEYS`: public keys the idp publishes in its JWKS next to its own, so that a
 * test suite can sign tokens with claims the idp never issues (expired, not yet valid, another
 * issuer or audience) and prove the gateway refuses them for that reason alone. Honoured only
 * when NODE_ENV is `test`; set anywhere else it stops the start, so a deployment cannot enable it.
 */
export function parseTestPublishedKeys(raw: string | undefined, nodeEnv: string | undefined): readonly PublishedPublicKey[] {
  if (raw === undefined || raw === '') return [];
  if (nodeEnv !== 'test') throw new Error('IDP_TEST_PUBLISHED_KEYS is for test suites only (NODE_ENV=test); unset it');
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    throw new Error('IDP_TEST_PUBLISHED_KEYS must be a JSON key set');
  }
  const result = PublishedKeysSchema.safeParse(parsed);
  if (!result.success) throw new Error('IDP_TEST_PUBLISHED_KEYS must hold 1 to 5 public EC or RSA signing keys with a kid, and nothing private');
  return result.data.keys;
}
