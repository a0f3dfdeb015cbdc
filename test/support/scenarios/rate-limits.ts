import { randomUUID } from 'node:crypto';
import { ApiResponse, call, clientCredentialsToken, postDeclaringLength, retryAfterMs } from '../api-client';
import type { ScenarioContext, Tenant } from '../gateway-scenarios';
import { expectProblem } from '../gateway-scenarios';
import { sample } from '../metrics-text';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

// 60 per minute: a burst of ⌈60/6⌉ + 1 = 11, then one token a second — short tests.
const RPM = 60;
const BURST = 11;
const RATE_LIMIT = /^"enterprise";r=(\d+);t=(\d+)$/;

/** Per-tenant rate limits (README, "Rate limits") as a client sees them. */
export function describeRateLimitScenarios(context: ScenarioContext): void {
  const gateway = (): string => context.deployment.gatewayUrl;

  async function enterpriseTenant(name: string): Promise<Tenant> {
    const created = await call(gateway(), 'POST', '/admin/tenants', { token: context.adminToken, body: { name, tier: 'enterprise', rpm: RPM } });
    expect(created.status).toBe(201);
    const { clientId, clientSecret } = created.body.client;
    const token = (await clientCredentialsToken(context.deployment.issuer, clientId, clientSecret)).access_token;
    return { id: created.body.id, token, clientId, clientSecret };
  }

  /** A cheap tenant request: refused by validation before any service is asked. */
  const invalidSubmit = (tenant: Tenant) => call(gateway(), 'POST', '/api/missions', { token: tenant.token, body: {} });

  function remaining(response: { headers: Headers }): number {
    const match = RATE_LIMIT.exec(response.headers.get('ratelimit') ?? '');
    if (!match) throw new Error(`No RateLimit field: ${response.headers.get('ratelimit')}`);
    return Number(match[1]);
  }

  describe('rate limits', () => {
    it('puts RateLimit-Policy and RateLimit on every tenant response, successes and errors alike', async () => {
      const tenant = await enterpriseTenant('Headers');
      const first = await call(gateway(), 'GET', `/api/missions/${randomUUID()}`, { token: tenant.token });
      expectProblem(first, 404, 'not_found');
      expect(first.headers.get('ratelimit-policy')).toBe(`"enterprise";q=${RPM};w=60`);
      // One token taken out of 11; refilled at one a second, the bucket is full again within 1 s.
      expect(first.headers.get('ratelimit')).toBe(`"enterprise";r=${BURST - 1};t=1`);

      const listed = await call(gateway(), 'GET', '/api/missions', { token: tenant.token });
      const invalid = await invalidSubmit(tenant);
      expect(listed.status).toBe(200);
      expectProblem(invalid, 400, 'validation_failed');
      for (const response of [listed, invalid]) {
        expect(response.headers.get('ratelimit-policy')).toBe(`"enterprise";q=${RPM};w=60`);
        expect(response.headers.get('ratelimit')).toMatch(RATE_LIMIT);
      }
      expect(remaining(invalid)).toBeLessThan(BURST - 1);

      // Refused for a scope the token lacks: still the tenant's request, counted and labelled.
      const narrow = await call(gateway(), 'POST', `/admin/tenants/${tenant.id}/clients`, { token: context.adminToken, body: { scopes: ['missions:read'] } });
      expect(narrow.status).toBe(201);
      const readOnly = (await clientCredentialsToken(context.deployment.issuer, narrow.body.clientId, narrow.body.clientSecret)).access_token;
      const refused = [];
      for (let i = 0; i < 3; i++) refused.push(await call(gateway(), 'POST', '/api/missions', { token: readOnly, body: {} }));
      for (const response of refused) {
        expectProblem(response, 403, 'insufficient_scope');
        expect(response.headers.get('ratelimit-policy')).toBe(`"enterprise";q=${RPM};w=60`);
      }
      expect(remaining(refused[2] as ApiResponse)).toBeLessThan(remaining(refused[0] as ApiResponse));

      // So are requests refused before any handler: malformed, not JSON, too large, or to no route.
      const early = [
        await call(gateway(), 'POST', '/api/missions', { token: tenant.token, rawBody: '{"title":' }),
        await call(gateway(), 'POST', '/api/missions', { token: tenant.token, rawBody: 'title=x', contentType: 'application/x-www-form-urlencoded' }),
        // Declared, not sent: a whole oversized body races the connection closing after the 413 (EPIPE).
        await postDeclaringLength(gateway(), '/api/missions', tenant.token, 2 * 1024 * 1024 + 16),
        await call(gateway(), 'GET', '/api/nowhere', { token: tenant.token }),
      ];
      expect(early.map((response) => response.status)).toEqual([400, 415, 413, 404]);
      for (const response of early) expect(response.headers.get('ratelimit-policy')).toBe(`"enterprise";q=${RPM};w=60`);
      expect(remaining(early[3] as ApiResponse)).toBeLessThan(remaining(early[0] as ApiResponse));
    });

    it('leaves public, operator and unauthenticated responses without RateLimit fields', async () => {
      const responses = [
        await call(gateway(), 'GET', '/health/live'),
        await call(gateway(), 'GET', '/.well-known/oauth-protected-resource'),
        await call(gateway(), 'GET', `/admin/tenants/${context.tenantA.id}`, { token: context.adminToken }),
        await call(gateway(), 'GET', `/api/missions/${randomUUID()}`),
      ];
      expect(responses.map((response) => response.status)).toEqual([200, 200, 200, 401]);
      for (const response of responses) {
        expect(response.headers.get('ratelimit')).toBeNull();
        expect(response.headers.get('ratelimit-policy')).toBeNull();
      }
    });

    it('refuses past the burst with 429, Retry-After and no caching, and admits the retry after that long', async () => {
      const tenant = await enterpriseTenant('Burst');
      const started = Date.now();
      let admitted = 0;
      let refused: ApiResponse | undefined;
      while (!refused && admitted < 4 * BURST) {
        const response = await invalidSubmit(tenant);
        if (response.status === 429) refused = response;
        else admitted += 1;
      }
      const elapsedSeconds = (Date.now() - started) / 1000;
      expect(admitted).toBeGreaterThanOrEqual(BURST);
      expect(admitted).toBeLessThanOrEqual(BURST + Math.floor((RPM / 60) * elapsedSeconds));
      if (!refused) throw new Error(`No 429 after ${admitted} requests`);

      expectProblem(refused, 429, 'rate_limited');
      expect(refused.body.type).toMatch(/#quota-exceeded$/);
      expect(refused.headers.get('cache-control')).toBe('no-store');
      // The next token is at most a second away: Retry-After rounds it up to whole seconds.
      expect(refused.headers.get('retry-after')).toBe('1');
      expect(refused.headers.get('ratelimit')).toBe('"enterprise";r=0;t=1');
      expect(refused.headers.get('ratelimit-policy')).toBe(`"enterprise";q=${RPM};w=60`);

      await sleep(Number(refused.headers.get('retry-after')) * 1000);
      const retried = await invalidSubmit(tenant);
      expectProblem(retried, 400, 'validation_failed');
    });

    it('gives every tenant a budget of its own', async () => {
      const [busy, quiet] = [await enterpriseTenant('Busy'), await enterpriseTenant('Quiet')];
      const statuses = await Promise.all(Array.from({ length: 3 * BURST }, () => invalidSubmit(busy).then((response) => response.status)));
      expect(statuses).toContain(429);
      const other = await invalidSubmit(quiet);
      expect(other.status).toBe(400);
      expect(remaining(other)).toBe(BURST - 1);
    });

    // That a change applies within 5 s is the policy cache's deterministic unit test (a manual
    // clock, tenant-policies.spec.ts); a wall clock here would only add a loaded machine's delays.
    it('applies a changed limit to the same token, without a new one', async () => {
      const tenant = await enterpriseTenant('Upgraded');
      expect((await invalidSubmit(tenant)).headers.get('ratelimit-policy')).toBe(`"enterprise";q=${RPM};w=60`);
      const changed = await call(gateway(), 'PATCH', `/admin/tenants/${tenant.id}`, { token: context.adminToken, body: { tier: 'professional' } });
      expect(changed.status).toBe(200);
      const deadline = Date.now() + 30_000;
      let policy: string | null = null;
      while (Date.now() < deadline) {
        const response = await invalidSubmit(tenant);
        policy = response.headers.get('ratelimit-policy');
        if (policy === '"professional";q=2000;w=60') break;
        // 500 ms apart (the bucket refills one a second), and after any 429's Retry-After.
        await sleep(Math.max(500, retryAfterMs('POST', response) ?? 0));
      }
      expect(policy).toBe('"professional";q=2000;w=60');
    });

    it('shows where limits are kept in readiness and counts decisions in the metrics', async () => {
      const ready = await call(context.deployment.opsUrl, 'GET', '/health/ready');
      expect(ready.body.details.rateLimits).toMatchObject({ up: true, mode: expect.stringMatching(/^(memory|redis)$/) });
      const metrics = await call(context.deployment.opsUrl, 'GET', '/metrics');
      expect(metrics.status).toBe(200);
      expect(metrics.headers.get('content-type')).toContain('text/plain');
      const store = ready.body.details.rateLimits.mode;
      expect(sample(metrics.body, 'rate_limit_decisions_total', { decision: 'allowed', store })).toBeGreaterThan(0);
      expect(sample(metrics.body, 'rate_limit_decisions_total', { decision: 'refused', store })).toBeGreaterThan(0);
      // Decisions are counted by tier, never by tenant.
      const tiers = [...(metrics.body as string).matchAll(/^rate_limit_decisions_total\{([^}]*)\}/gm)].map((line) => /tier="([^"]*)"/.exec(line[1])?.[1]);
      expect(tiers.length).toBeGreaterThan(0);
      expect(tiers.filter((tier) => !['starter', 'business', 'professional', 'enterprise'].includes(tier ?? ''))).toEqual([]);
      expect(metrics.body).not.toMatch(/rate_limit_decisions_total\{[^}]*tenant/);
      expect(sample(metrics.body, 'rate_limit_fallback_active')).toBe(0);
    });
  });
}
