import { generateKeyPairSync, KeyObject, randomUUID } from 'node:crypto';

export interface TestSigningKey {
  readonly kid: string;
  readonly privateKey: KeyObject;
  readonly publicJwk: Record<string, string>;
}

let key: TestSigningKey | undefined;

/**
 * One ES256 key per test file, whose public half the deployment's idp publishes in its JWKS
 * (IDP_TEST_PUBLISHED_KEYS, honoured only with NODE_ENV=test). Tests sign tokens with it that the
 * idp never issues — expired, not yet valid, another issuer or audience — so a refusal can only
 * be for that reason: the same key with sound claims is accepted.
 */
export function testSigningKey(): TestSigningKey {
  if (!key) {
    const pair = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const { kty, crv, x, y } = pair.publicKey.export({ format: 'jwk' }) as Record<string, string>;
    const kid = `test-${randomUUID()}`;
    key = { kid, privateKey: pair.privateKey, publicJwk: { kty, crv, x, y, kid, alg: 'ES256', use: 'sig' } };
  }
  return key;
}

/** The environment that makes an idp publish the test key. */
export function testSigningKeyEnv(): Record<string, string> {
  return { IDP_TEST_PUBLISHED_KEYS: JSON.stringify({ keys: [testSigningKey().publicJwk] }) };
}
