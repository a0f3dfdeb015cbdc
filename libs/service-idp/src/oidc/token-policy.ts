import { isUuid, Scopes, TENANT_SCOPES } from '@mission/contracts';
import { SIGNING_ALGORITHM } from '../keys/idp-keys';

/** Access tokens live one hour: `exp = iat + 3600`. */
export const ACCESS_TOKEN_TTL_SECONDS = 3600;

/** A sign-in's refresh tokens (rotated on every use) and its grant last 14 days. */
export const REFRESH_TOKEN_TTL_SECONDS = 14 * 24 * 3600;

/** Every scope the provider knows: the tenant scopes and the operator scope. */
export const SUPPORTED_SCOPES: readonly string[] = [...TENANT_SCOPES, Scopes.platformAdmin];

export type ScopeDecision = { readonly ok: true; readonly scopes: readonly string[] } | { readonly ok: false; readonly rejected: string };

/**
 * The scopes a client_credentials token gets: the requested ones when all are the client's,
 * or all of the client's when it asks for none (RFC 6749 §3.3 lets the server define that
 * default). One scope the client does not hold refuses the whole request.
 */
export function decideScopes(requested: unknown, allowed: readonly string[]): ScopeDecision {
  const asked = typeof requested === 'string' ? [...new Set(requested.split(' ').filter(Boolean))] : [];
  if (asked.length === 0) return { ok: true, scopes: [...allowed] };
  const allowedSet = new Set(allowed);
  const rejected = asked.find((scope) => !allowedSet.has(scope));
  return rejected === undefined ? { ok: true, scopes: asked } : { ok: false, rejected };
}

/** The claims a token carries beyond the standard ones: the tenant of a tenant client, nothing for the operator. */
export function tenantClaims(client: { readonly [metadata: string]: unknown } | undefined): { tenant_id: string } | undefined {
  const tenantId = client?.tenant_id;
  return isUuid(tenantId) ? { tenant_id: tenantId.toLowerCase() } : undefined;
}

/**
 * oidc-provider reads the clock twice (once for `exp`, once for `iat`), so a second boundary
 * between the two reads could make a token one second short. Derive `exp` from `iat` instead.
 */
export function pinExpiry(payload: Record<string, unknown>): void {
  if (typeof payload.iat === 'number') payload.exp = payload.iat + ACCESS_TOKEN_TTL_SECONDS;
}

/** How the gateway, the only resource server, wants its tokens: JWTs for its audience, signed ES256. */
export function gatewayResourceServer(audience: string): {
  scope: string;
  audience: string;
  accessTokenTTL: number;
  accessTokenFormat: 'jwt';
  jwt: { sign: { alg: string } };
} {
  return {
    scope: SUPPORTED_SCOPES.join(' '),
    audience,
    accessTokenTTL: ACCESS_TOKEN_TTL_SECONDS,
    accessTokenFormat: 'jwt',
    jwt: { sign: { alg: SIGNING_ALGORITHM } },
  };
}
