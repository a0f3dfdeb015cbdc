import { freePort } from '@mission/persistence';
import { OwnRedisServer, startOwnRedisServer } from '@mission/rate-limit/testing';
import { call, clientCredentialsToken } from '../support/api-client';
import { DistributedStack, startDistributedStack } from '../support/distributed-stack';
import { RunningProcess, startProcess, waitUntilReady } from '../support/processes';
import { sample } from '../support/metrics-text';
import { kafkaAccessFromEnv, kafkaEnvFor } from '../support/kafka-access';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

// 600 per minute: 10 tokens a second and a burst of ⌈600/6⌉ + 1 = 101.
const RPM = 600;
const BURST = 101;
const RATE = RPM / 60;

interface Tenant {
  readonly id: string;
  readonly token: string;
}

/**
 * Rate limits of the distributed deployment: gateway replicas share each tenant's one budget
 * through Redis, and a replica whose Redis goes away keeps serving from its own memory.
 */
describe('Rate limits across gateway replicas', () => {
  let stack: DistributedStack;
  let adminToken: string;
  const extraGateways: RunningProcess[] = [];
  let replicaUrl: string;
  let replicaOps: string;
  let isolatedUrl: string;
  let isolatedOps: string;
  let isolated: RunningProcess;
  let ownRedis: OwnRedisServer;

  async function startGateway(name: string, redisUrl: string): Promise<{ url: string; opsUrl: string; process: RunningProcess }> {
    const [port, opsPort] = [await freePort(), await freePort()];
    const child = startProcess(name, 'apps/gateway/src/main.ts', {
      ...kafkaEnvFor(kafkaAccessFromEnv(), 'gateway'),
      KEK: stack.kek,
      HOST: '127.0.0.1',
      PORT: String(port),
      OPS_PORT: String(opsPort),
      // A replica behind the same public address: tokens carry that audience.
      PUBLIC_URL: stack.gatewayUrl,
      IDP_ISSUER: stack.issuer,
      REDIS_URL: redisUrl,
      GATEWAY_REPLICAS: '2',
      LOG_LEVEL: 'info',
    });
    extraGateways.push(child);
    const url = `http://127.0.0.1:${port}`;
    await waitUntilReady(`${url}/health/ready`, [child], 120_000);
    return { url, opsUrl: `http://127.0.0.1:${opsPort}`, process: child };
  }

  async function tenant(name: string): Promise<Tenant> {
    const created = await call(stack.gatewayUrl, 'POST', '/admin/tenants', { token: adminToken, body: { name, tier: 'enterprise', rpm: RPM } });
    expect(created.status).toBe(201);
    const { clientId, clientSecret } = created.body.client;
    return { id: created.body.id, token: (await clientCredentialsToken(stack.issuer, clientId, clientSecret)).access_token };
  }

  /** A cheap tenant request: 400 from validation (before any service), or 429. */
  const request = (url: string, who: Tenant) => call(url, 'POST', '/api/missions', { token: who.token, body: {} });

  /** `workers` concurrent clients per gateway for `ms`; statuses per gateway and the elapsed seconds. */
  async function hammer(urls: readonly string[], who: Tenant, ms: number, workers = 16): Promise<{ statuses: number[][]; seconds: number }> {
    const started = performance.now();
    const statuses = await Promise.all(
      urls.map(async (url) => {
        const seen: number[] = [];
        await Promise.all(
          Array.from({ length: workers }, async () => {
            while (performance.now() - started < ms) seen.push((await request(url, who)).status);
          }),
        );
        return seen;
      }),
    );
    return { statuses, seconds: (performance.now() - started) / 1000 };
  }

  const admitted = (statuses: readonly number[]): number => statuses.filter((status) => status === 400).length;

  /** Requests the gateways admitted from their own fallback buckets so far (their /metrics, on their operations ports). */
  async function admittedByFallback(urls: readonly string[]): Promise<number> {
    const counts = await Promise.all(
      urls.map(async (url) => {
        const text = (await call(url, 'GET', '/metrics')).body as string;
        return sample(text, 'rate_limit_decisions_total', { decision: 'allowed', store: 'fallback' }) ?? 0;
      }),
    );
    return counts.reduce((sum, count) => sum + count, 0);
  }

  beforeAll(async () => {
    stack = await startDistributedStack(kafkaAccessFromEnv(), process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres');
    adminToken = (await clientCredentialsToken(stack.issuer, stack.admin.clientId, stack.admin.clientSecret)).access_token;
    ({ url: replicaUrl, opsUrl: replicaOps } = await startGateway('gateway-replica', process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379'));
    ownRedis = await startOwnRedisServer();
    ({ url: isolatedUrl, opsUrl: isolatedOps, process: isolated } = await startGateway('gateway-own-redis', ownRedis.url));
  }, 240_000);

  afterAll(async () => {
    const codes = await Promise.all(extraGateways.map(async (child) => [child.name, await child.stop()] as const));
    await ownRedis?.kill();
    if (stack) expect(await stack.stop()).toEqual([]);
    expect(codes.filter(([, code]) => code !== 0)).toEqual([]);
  }, 120_000);

  it('keeps one budget for a tenant hammered through two gateways at once', async () => {
    const busy = await tenant('Hammered');
    const fallbackBefore = await admittedByFallback([stack.opsUrl('gateway'), replicaOps]);
    const { statuses, seconds } = await hammer([stack.gatewayUrl, replicaUrl], busy, 3_000);
    // A Redis call slower than its 200 ms timeout (a starved machine) is decided from the
    // replica's own bucket by design: those admissions are outside the shared budget.
    const fallback = (await admittedByFallback([stack.opsUrl('gateway'), replicaOps])) - fallbackBefore;
    const total = statuses.flat();
    expect(total.every((status) => status === 400 || status === 429)).toBe(true);
    expect(statuses.map((seen) => [admitted(seen) > 0, seen.includes(429)])).toEqual([
      [true, true],
      [true, true],
    ]);
    const both = admitted(total);
    expect(both).toBeGreaterThanOrEqual(BURST);
    // Each gateway alone would have admitted about this much: together they stay within one.
    expect(both - fallback).toBeLessThanOrEqual(Math.floor(BURST + RATE * seconds));
    // Most decisions went through the shared Redis bucket (a broken Redis path would fail here).
    expect(both - fallback).toBeGreaterThanOrEqual(Math.floor(BURST / 2));
  });

  it('never lets two tenants share a budget', async () => {
    const [busy, quiet] = [await tenant('Busy'), await tenant('Quiet')];
    // The busy tenant's budget runs dry during the hammering (a single request afterwards could
    // already find the next token: at 10 a second one arrives every 100 ms).
    // Hammered until both gateways have refused it (a slow machine needs longer to drain 101 tokens).
    const refusedBy = [false, false];
    for (let round = 0; round < 10 && refusedBy.includes(false); round++) {
      const { statuses } = await hammer([stack.gatewayUrl, replicaUrl], busy, 1_000);
      statuses.forEach((seen, index) => (refusedBy[index] ||= seen.includes(429)));
    }
    expect(refusedBy).toEqual([true, true]);
    for (const url of [stack.gatewayUrl, replicaUrl]) {
      const response = await request(url, quiet);
      expect(response.status).toBe(400);
    }
    expect((await request(replicaUrl, quiet)).headers.get('ratelimit')).toMatch(/^"enterprise";r=(9[0-9]|100);t=1$/);
  });

  it('serves from per-replica memory while its Redis is down, says so, and shares again once it is back', async () => {
    const readiness = async () => (await call(isolatedOps, 'GET', '/health/ready')).body;
    const metrics = async () => (await call(isolatedOps, 'GET', '/metrics')).body as string;
    expect((await readiness()).details.rateLimits).toMatchObject({ up: true, mode: 'redis' });
    const before = await tenant('Before the outage');
    expect((await request(isolatedUrl, before)).status).toBe(400);

    await ownRedis.kill();
    const during = await tenant('During the outage');
    const { statuses, seconds } = await hammer([isolatedUrl], during, 2_000, 8);
    const seen = statuses.flat();
    expect(seen.every((status) => status === 400 || status === 429)).toBe(true);
    // This replica's half of 600/min: a burst of ⌈300/6⌉ + 1 = 51 and 5 a second.
    expect(admitted(seen)).toBeGreaterThanOrEqual(51);
    expect(admitted(seen)).toBeLessThanOrEqual(Math.floor(51 + (RATE / 2) * seconds));
    const refused = await request(isolatedUrl, during);
    expect(refused.headers.get('ratelimit-policy')).toBe(`"enterprise";q=${RPM};w=60`);

    const ready = await readiness();
    expect(ready.status).toBe('up');
    expect(ready.details.rateLimits).toMatchObject({ up: true, mode: 'fallback', replicas: 2, outages: 1, fallbackSince: expect.any(String) });
    const text = await metrics();
    expect(sample(text, 'rate_limit_fallback_active')).toBe(1);
    expect(sample(text, 'rate_limit_redis_outages_total')).toBe(1);
    expect(sample(text, 'rate_limit_decisions_total', { decision: 'refused', store: 'fallback' })).toBeGreaterThan(0);

    await ownRedis.restart();
    const deadline = Date.now() + 10_000;
    while ((await readiness()).details.rateLimits.mode !== 'redis') {
      if (Date.now() > deadline) throw new Error('The gateway did not return to Redis');
      await sleep(100);
    }
    expect(sample(await metrics(), 'rate_limit_fallback_active')).toBe(0);
    const after = await request(isolatedUrl, await tenant('After the outage'));
    expect(after.headers.get('ratelimit')).toBe(`"enterprise";r=${BURST - 1};t=1`);
    const output = isolated.output();
    expect(output.match(/Redis is unreachable/g)).toHaveLength(1);
    expect(output.match(/Redis is reachable again/g)).toHaveLength(1);
  });
});
