import { Scopes, TENANT_SCOPES } from '@mission/contracts';
import { ACCESS_TOKEN_TTL_SECONDS, decideScopes, gatewayResourceServer, pinExpiry, SUPPORTED_SCOPES, tenantClaims } from './token-policy';

describe('decideScopes', () => {
  const allowed = [...TENANT_SCOPES];

  it('grants all of the client scopes when none is requested', () => {
    expect(decideScopes(undefined, allowed)).toEqual({ ok: true, scopes: allowed });
    expect(decideScopes('', allowed)).toEqual({ ok: true, scopes: allowed });
    expect(decideScopes('   ', allowed)).toEqual({ ok: true, scopes: allowed });
  });

  it('grants exactly a requested subset, once each', () => {
    expect(decideScopes('hits:read missions:read hits:read', allowed)).toEqual({ ok: true, scopes: ['hits:read', 'missions:read'] });
  });

  it('refuses the request when one scope is not the client’s', () => {
    expect(decideScopes('missions:read platform:admin', allowed)).toEqual({ ok: false, rejected: 'platform:admin' });
    expect(decideScopes('missions:read', [Scopes.platformAdmin])).toEqual({ ok: false, rejected: 'missions:read' });
    expect(decideScopes('openid', allowed)).toEqual({ ok: false, rejected: 'openid' });
  });

  it('gives the operator client only platform:admin', () => {
    expect(decideScopes(undefined, [Scopes.platformAdmin])).toEqual({ ok: true, scopes: ['platform:admin'] });
  });
});

describe('tenantClaims', () => {
  it('adds tenant_id for a tenant client, normalised to lower case', () => {
    expect(tenantClaims({ tenant_id: '3F2504E0-4F89-41D3-9A0C-0305E82C3301' })).toEqual({ tenant_id: '3f2504e0-4f89-41d3-9a0c-0305e82c3301' });
  });

  it('adds nothing for the operator client or a client without a valid tenant', () => {
    expect(tenantClaims({})).toBeUndefined();
    expect(tenantClaims(undefined)).toBeUndefined();
    expect(tenantClaims({ tenant_id: 'not-a-uuid' })).toBeUndefined();
  });
});

describe('pinExpiry', () => {
  it('makes exp exactly one hour after iat', () => {
    const payload: Record<string, unknown> = { iat: 1_700_000_000, exp: 1_700_003_599 };
    pinExpiry(payload);
    expect(payload.exp).toBe(1_700_000_000 + ACCESS_TOKEN_TTL_SECONDS);
    expect(ACCESS_TOKEN_TTL_SECONDS).toBe(3600);
  });
});

describe('gatewayResourceServer', () => {
  it('asks for one-hour ES256 JWTs for the gateway audience, covering every known scope', () => {
    expect(gatewayResourceServer('http://127.0.0.1:3000')).toEqual({
      scope: SUPPORTED_SCOPES.join(' '),
      audience: 'http://127.0.0.1:3000',
      accessTokenTTL: 3600,
      accessTokenFormat: 'jwt',
      jwt: { sign: { alg: 'ES256' } },
    });
    expect(SUPPORTED_SCOPES).toEqual([...TENANT_SCOPES, 'platform:admin']);
  });
});
