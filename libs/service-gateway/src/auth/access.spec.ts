import type { FastifyReply, FastifyRequest } from 'fastify';
import { ErrorCode, type OperationAccess, Scopes } from '@mission/contracts';
import type { RateLimitDecision } from '@mission/rate-limit';
import type { TenantRateLimiter } from '../rate-limit/tenant-rate-limiter';
import { isOpenApiRoute } from '../openapi/document';
import { type AccessDependencies, declaredRouteConfig, enforceAccess } from './access';
import type { Authenticated } from './authenticated';
import { InvalidTokenError, type TokenVerifier } from './token-verifier';

const TENANT = '5d0a4c1e-2b3f-4a5d-8e6f-7a8b9c0d1e2f';
const tokens: Record<string, Authenticated> = {
  reader: { subject: 'reader', clientId: 'c1', tokenId: 't1', tenantId: TENANT, scopes: new Set([Scopes.missionsRead]) },
  operator: { subject: 'operator', clientId: 'op', tokenId: 't2', scopes: new Set([Scopes.platformAdmin]) },
};

function harness(budgetLeft = true) {
  const charged: string[] = [];
  const headers: Record<string, unknown> = {};
  const verifier = {
    verify: async (token: string) => {
      const caller = tokens[token];
      if (!caller) throw new InvalidTokenError('The token is invalid');
      return caller;
    },
  } as unknown as TokenVerifier;
  const rateLimits = {
    enabled: true,
    admit: async (tenantId: string): Promise<RateLimitDecision> => {
      charged.push(tenantId);
      return { allowed: budgetLeft, policy: { name: 'business', limit: 500 }, remaining: budgetLeft ? 10 : 0, resetSeconds: 1, retryAfterSeconds: 1, store: 'memory' };
    },
  } as unknown as TenantRateLimiter;
  const dependencies: AccessDependencies = { verifier, rateLimits, publicUrl: 'https://api.example' };
  const reply = { headers: (added: Record<string, unknown>) => Object.assign(headers, added) } as unknown as FastifyReply;
  const request = (route: { url?: string; access?: OperationAccess }, token?: string): FastifyRequest =>
    ({
      method: 'GET',
      headers: token ? { authorization: `Bearer ${token}` } : {},
      routeOptions: { url: route.url, config: route.access ? { access: route.access } : {} },
    }) as unknown as FastifyRequest;
  const enforce = async (route: { url?: string; access?: OperationAccess }, path: string, token?: string) => {
    const arriving = request(route, token);
    const outcome = await enforceAccess(arriving, reply, path, dependencies).then(
      () => 'admitted',
      (error: unknown) => (error as { code?: string }).code ?? String(error),
    );
    return { outcome, caller: arriving.auth?.subject, charged: [...charged], headers };
  };
  return { enforce };
}

const missionsRead: OperationAccess = { scopes: [Scopes.missionsRead] };
const missionsWrite: OperationAccess = { scopes: [Scopes.missionsWrite] };

describe('access on arrival', () => {
  it('lets anyone call a public route, without looking at a token', async () => {
    expect(await harness().enforce({ url: '/health/live', access: 'public' }, '/health/live', 'forged')).toMatchObject({ outcome: 'admitted', caller: undefined, charged: [] });
  });

  it('admits a tenant token holding the route’s scopes, charged to its tenant, with the RateLimit fields', async () => {
    const result = await harness().enforce({ url: '/api/missions/:id', access: missionsRead }, '/api/missions/1', 'reader');
    expect(result).toMatchObject({ outcome: 'admitted', caller: 'reader', charged: [TENANT] });
    expect(Object.keys(result.headers)).toEqual(expect.arrayContaining(['RateLimit', 'RateLimit-Policy']));
  });

  it('refuses a tenant route without a valid token, whatever else, and charges no one', async () => {
    expect(await harness().enforce({ url: '/api/missions', access: missionsRead }, '/api/missions')).toMatchObject({ outcome: ErrorCode.Unauthorized, charged: [] });
    expect(await harness().enforce({ url: '/api/missions', access: missionsRead }, '/api/missions', 'forged')).toMatchObject({ outcome: ErrorCode.Unauthorized, charged: [] });
  });

  it('charges a tenant’s request before refusing it for a missing scope (the 403 counts and carries the RateLimit fields)', async () => {
    expect(await harness().enforce({ url: '/api/missions', access: missionsWrite }, '/api/missions', 'reader')).toMatchObject({
      outcome: ErrorCode.InsufficientScope,
      charged: [TENANT],
    });
  });

  it('answers 429 once the tenant’s budget is used up, before the scopes are looked at', async () => {
    expect(await harness(false).enforce({ url: '/api/missions', access: missionsWrite }, '/api/missions', 'reader')).toMatchObject({ outcome: ErrorCode.RateLimited });
  });

  it('keeps the operator off tenant routes, and tenants off operator routes', async () => {
    expect(await harness().enforce({ url: '/api/missions', access: { scopes: [] } }, '/api/missions', 'operator')).toMatchObject({
      outcome: ErrorCode.InsufficientScope,
      charged: [],
    });
    expect(await harness().enforce({ url: '/admin/tenants', access: 'operator' }, '/admin/tenants', 'reader')).toMatchObject({ outcome: ErrorCode.InsufficientScope, charged: [] });
    expect(await harness().enforce({ url: '/admin/tenants', access: 'operator' }, '/admin/tenants', 'operator')).toMatchObject({ outcome: 'admitted', caller: 'operator' });
  });

  it('authenticates and charges a request no route serves under /api or /mcp (then answered 404), and leaves other unknown paths alone', async () => {
    expect(await harness().enforce({}, '/api/nowhere', 'reader')).toMatchObject({ outcome: 'admitted', charged: [TENANT] });
    expect(await harness().enforce({}, '/mcp/extra')).toMatchObject({ outcome: ErrorCode.Unauthorized });
    expect(await harness().enforce({}, '/apis', 'forged')).toMatchObject({ outcome: 'admitted', charged: [] });
    expect(await harness().enforce({}, '/favicon.ico')).toMatchObject({ outcome: 'admitted', charged: [] });
  });

  it('fails closed on a routed request whose route declares nothing', async () => {
    expect((await harness().enforce({ url: '/api/undeclared' }, '/api/undeclared', 'reader')).outcome).toContain('declares no access rule');
  });
});

describe('route declarations', () => {
  const openApi = isOpenApiRoute;

  it('keeps a route’s own declaration', () => {
    expect(declaredRouteConfig({ method: 'POST', url: '/api/brain/documents', config: { access: missionsRead, bodyLimit: 42 } }, openApi)).toEqual({
      access: missionsRead,
      bodyLimit: 42,
    });
  });

  it('declares public the routes the OpenAPI module registers without a config', () => {
    expect(declaredRouteConfig({ method: ['GET', 'HEAD'], url: '/api/docs/*', config: { other: true } }, openApi)).toEqual({ other: true, access: 'public' });
  });

  it('refuses any other route without a declaration, so the gateway does not start with it', () => {
    expect(() => declaredRouteConfig({ method: 'GET', url: '/api/forgotten', config: {} }, openApi)).toThrow('Route GET /api/forgotten declares no access rule');
    expect(() => declaredRouteConfig({ method: 'GET', url: '/api/forgotten' }, openApi)).toThrow('declares no access rule');
    expect(() => declaredRouteConfig({ method: 'GET', url: '/api/openapi.json.bak' }, openApi)).toThrow('declares no access rule');
  });
});
