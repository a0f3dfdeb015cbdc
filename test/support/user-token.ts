import { randomBytes, randomUUID } from 'node:crypto';
import { SignJWT } from 'jose';
import { call } from './api-client';
import { testSigningKey } from './test-signing-key';

/**
 * A person's access token as the idp issues one after sign-in (its `username` claim included),
 * signed with the test key the deployment's idp publishes (IDP_TEST_PUBLISHED_KEYS): users are
 * named without a browser. That the idp itself adds the claim is checked by the sign-in suite.
 */
export function userToken(
  deployment: { readonly issuer: string; readonly gatewayUrl: string },
  tenant: { readonly id: string; readonly clientId: string },
  username: string,
  scopes = 'missions:read missions:write hits:read hits:approve',
): Promise<string> {
  const key = testSigningKey();
  return new SignJWT({ client_id: tenant.clientId, tenant_id: tenant.id, scope: scopes, username })
    .setProtectedHeader({ alg: 'ES256', typ: 'at+jwt', kid: key.kid })
    .setIssuer(deployment.issuer)
    .setAudience(deployment.gatewayUrl)
    .setSubject(randomUUID())
    .setJti(randomUUID())
    .setIssuedAt()
    .setExpirationTime('1h')
    .sign(key.privateKey);
}

/** Creates the tenant's user `username` unless it exists (an approval's assignees must be users of the tenant). */
export async function ensureUser(
  gatewayUrl: string,
  adminToken: string,
  tenantId: string,
  username: string,
  scopes = ['missions:read', 'missions:write', 'hits:read', 'hits:approve'],
): Promise<void> {
  const created = await call(gatewayUrl, 'POST', `/admin/tenants/${tenantId}/users`, {
    token: adminToken,
    body: { username, password: `pw-${randomBytes(12).toString('base64url')}`, scopes },
  });
  if (created.status !== 201 && created.status !== 409) throw new Error(`Creating user ${username} answered ${created.status}`);
}
