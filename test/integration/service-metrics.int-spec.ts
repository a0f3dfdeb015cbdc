import { call, clientCredentialsToken, waitForMission } from '../support/api-client';
import { DistributedStack, startDistributedStack } from '../support/distributed-stack';
import { sample } from '../support/metrics-text';

/** Each back-end service serves its own Prometheus metrics next to its health endpoints. */
describe('Service metrics in the distributed deployment', () => {
  let stack: DistributedStack;

  beforeAll(async () => {
    stack = await startDistributedStack(process.env.KAFKA_BROKERS ?? '', process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres');
  }, 180_000);

  afterAll(async () => {
    if (stack) expect(await stack.stop()).toEqual([]);
  }, 120_000);

  it('reports bus handling, consumer lag, the database pool and the outbox backlog of the services and the idp, without tenant ids', async () => {
    const admin = await clientCredentialsToken(stack.issuer, stack.admin.clientId, stack.admin.clientSecret);
    const tenant = await call(stack.gatewayUrl, 'POST', '/admin/tenants', { token: admin.access_token, body: { name: 'Metrics', tier: 'business' } });
    const token = (await clientCredentialsToken(stack.issuer, tenant.body.client.clientId, tenant.body.client.clientSecret)).access_token;
    const submitted = await call(stack.gatewayUrl, 'POST', '/api/missions', { token, body: { title: 'Measured', objective: 'Show up in metrics' } });
    expect(submitted.status).toBe(202);
    expect((await waitForMission(stack.gatewayUrl, token, submitted.body.id)).status).toBe('succeeded');

    const response = await fetch(`${stack.baseUrl('mission-service')}/metrics`);
    expect(response.status).toBe(200);
    const text = await response.text();
    expect(sample(text, 'bus_handle_duration_seconds_count', { service: 'mission-service', topic: 'mission.requests.v1', group: 'mission-service', outcome: 'ok' })).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'bus_send_duration_seconds_count', { topic: 'mission.events.v1', result: 'ok' })).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'bus_consumer_lag', { topic: 'mission.requests.v1', group: 'mission-service' })).toBeGreaterThanOrEqual(0);
    expect(sample(text, 'db_pool_connections', { schema: 'mission', state: 'idle' })).toBeGreaterThanOrEqual(0);
    expect(sample(text, 'outbox_backlog', { schema: 'mission' })).toBe(0);
    expect(sample(text, 'process_resident_memory_bytes', { service: 'mission-service' })).toBeGreaterThan(0);
    expect(text).not.toContain(tenant.body.id);
    expect(text).not.toContain(submitted.body.id);

    const brain = await (await fetch(`${stack.baseUrl('brain-service')}/metrics`)).text();
    expect(sample(brain, 'bus_handle_duration_seconds_count', { service: 'brain-service', topic: 'brain.requests.v1', outcome: 'ok' })).toBeGreaterThanOrEqual(1);
    expect(sample(brain, 'db_pool_connections', { schema: 'brain', state: 'idle' })).toBeGreaterThanOrEqual(0);

    // The identity provider: token requests by route, its bus (tenant provisioning) and its database pool.
    const idpResponse = await fetch(`${stack.issuer}/metrics`);
    expect(idpResponse.status).toBe(200);
    const idp = await idpResponse.text();
    expect(sample(idp, 'http_server_request_duration_seconds_count', { service: 'idp', method: 'POST', route: '/token', status_code: '200' })).toBeGreaterThanOrEqual(2);
    expect(sample(idp, 'http_server_request_duration_seconds_count', { service: 'idp', method: 'GET', route: '/.well-known/openid-configuration', status_code: '200' })).toBeGreaterThanOrEqual(2);
    expect(sample(idp, 'bus_handle_duration_seconds_count', { service: 'idp', topic: 'identity.requests.v1', outcome: 'ok' })).toBeGreaterThanOrEqual(1);
    expect(sample(idp, 'db_pool_connections', { schema: 'identity', state: 'idle' })).toBeGreaterThanOrEqual(0);
    expect(idp).not.toContain(tenant.body.id);
    expect(idp).not.toContain(tenant.body.client.clientId);
  }, 120_000);
});
