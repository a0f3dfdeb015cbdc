import { call, clientCredentialsToken, eventually, politeCall } from '../support/api-client';
import { fuzzGateway, type FuzzReport } from '../support/http-fuzzer';
import { StandaloneProcess, startStandaloneProcess } from '../support/standalone-process';

/**
 * The seeded HTTP fuzzer against `npm start`'s all-in-one process: every route and MCP tool, with
 * valid tokens and without, valid bodies and broken ones. Seeds: FUZZ_SEEDS (comma-separated) or
 * a fixed one and one of the day (so every day tries requests nobody tuned on); FUZZ_REQUESTS per
 * seed (default 6,000). A finding names its seed: `FUZZ_SEEDS=<seed>` sends the same requests again.
 */
const DAY = Math.floor(Date.now() / 86_400_000);
const SEEDS = (process.env.FUZZ_SEEDS ?? `20261125,${DAY}`).split(',').map((seed) => Number(seed.trim()));
const REQUESTS = Number(process.env.FUZZ_REQUESTS ?? 6_000);

describe('HTTP fuzzing of the gateway (all-in-one process)', () => {
  let standalone: StandaloneProcess;
  let gatewayUrl: string;
  let target: Parameters<typeof fuzzGateway>[0];

  beforeAll(async () => {
    standalone = await startStandaloneProcess('fuzz', { GATEWAY_REQUEST_TIMEOUT_SECONDS: '10' });
    ({ gatewayUrl } = standalone);
    const { issuer, operatorToken: operator } = standalone;
    const tenant = await call(gatewayUrl, 'POST', '/admin/tenants', { token: operator, body: { name: 'Fuzzed', tier: 'enterprise', rpm: 1_000_000 } });
    expect(tenant.status).toBe(201);
    const { clientId, clientSecret } = tenant.body.client;
    const token = (await clientCredentialsToken(issuer, clientId, clientSecret)).access_token;
    const narrow = (await clientCredentialsToken(issuer, clientId, clientSecret, 'missions:read')).access_token;
    // Things that exist, so requests get past "not found": a mission waiting for approval, its item, a document.
    const mission = await call(gatewayUrl, 'POST', '/api/missions', { token, body: { title: 'Fuzz target', objective: 'Wait', steps: [{ type: 'approval', title: 'Decide' }] } });
    expect(mission.status).toBe(202);
    const hitId = await eventually(
      async () => (await politeCall(gatewayUrl, 'GET', `/api/missions/${mission.body.id}`, { token })).body.steps?.[0]?.hitId as string | undefined,
      'the approval item',
    );
    const document = await call(gatewayUrl, 'POST', '/api/brain/documents', { token, body: { title: 'Fuzz', content: 'Microwave dielectrics and their loss tangent.' } });
    expect(document.status).toBe(201);
    // The operator routes get another tenant's id: the operator token may change a tenant's tier,
    // and the fuzzed tenant must keep its limit.
    const other = await call(gatewayUrl, 'POST', '/admin/tenants', { token: operator, body: { name: 'Operated on', tier: 'starter' } });
    expect(other.status).toBe(201);
    target = { gatewayUrl, tokens: { tenant: token, narrow, operator }, ids: [mission.body.id, hitId, document.body.id, other.body.id] };
  }, 180_000);

  afterAll(async () => {
    if (standalone) expect(await standalone.stop()).toBe(0);
  }, 60_000);

  it.each(SEEDS)(
    'answers every request of seed %d without a 5xx, with problem details for errors, no stack trace and no reset connection',
    async (seed) => {
      const report: FuzzReport = await fuzzGateway(target, seed, REQUESTS);
      process.stderr.write(`[fuzz] seed ${seed}: ${report.requests} requests, by status ${JSON.stringify(report.byStatus)}, ${report.findings.length} findings\n`);
      // The fuzzer reached past the front door: successes and refusals of several kinds.
      expect(Object.keys(report.byStatus).filter((status) => status.startsWith('2')).length).toBeGreaterThanOrEqual(2);
      expect(Object.keys(report.byStatus).filter((status) => status.startsWith('4')).length).toBeGreaterThanOrEqual(5);
      expect({ seed, findings: report.findings.slice(0, 15), total: report.findings.length }).toEqual({ seed, findings: [], total: 0 });
      // The process is still serving after all of it.
      expect((await fetch(`${gatewayUrl}/health/ready`)).status).toBe(200);
    },
    600_000,
  );
});
