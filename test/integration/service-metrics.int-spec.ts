import { call, clientCredentialsToken, waitForMission } from '../support/api-client';
import { DistributedStack, startDistributedStack } from '../support/distributed-stack';
import { sample } from '../support/metrics-text';
import { OtlpCollector } from '../support/otlp-collector';
import { kafkaAccessFromEnv } from '../support/kafka-access';

const SERVER = 2;
const CONSUMER = 5;

/**
 * What an operator watches: each app's Prometheus metrics, and OpenTelemetry traces exported to a
 * tracing backend (here a collector of the test's own), configured by the standard OTEL_* variables.
 */
describe('Metrics and traces in the distributed deployment', () => {
  let stack: DistributedStack;
  const collector = new OtlpCollector();

  beforeAll(async () => {
    const endpoint = await collector.start();
    stack = await startDistributedStack(kafkaAccessFromEnv(), process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres', {
      OTEL_TRACES_EXPORTER: 'otlp',
      OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json',
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: endpoint,
      OTEL_BSP_SCHEDULE_DELAY: '200',
    });
  }, 180_000);

  afterAll(async () => {
    if (stack) expect(await stack.stop()).toEqual([]);
    await collector.stop();
  }, 120_000);

  it('reports bus handling, consumer lag, the database pool and the outbox backlog of the services and the idp, without tenant ids', async () => {
    const admin = await clientCredentialsToken(stack.issuer, stack.admin.clientId, stack.admin.clientSecret);
    const tenant = await call(stack.gatewayUrl, 'POST', '/admin/tenants', { token: admin.access_token, body: { name: 'Metrics', tier: 'business' } });
    const token = (await clientCredentialsToken(stack.issuer, tenant.body.client.clientId, tenant.body.client.clientSecret)).access_token;
    const submitted = await call(stack.gatewayUrl, 'POST', '/api/missions', { token, body: { title: 'Measured', objective: 'Show up in metrics' } });
    expect(submitted.status).toBe(202);
    expect((await waitForMission(stack.gatewayUrl, token, submitted.body.id)).status).toBe('succeeded');

    const response = await fetch(`${stack.opsUrl('mission-service')}/metrics`);
    expect(response.status).toBe(200);
    const text = await response.text();
    expect(
      sample(text, 'bus_handle_duration_seconds_count', { service: 'mission-service', topic: 'mission.requests.v1', group: 'mission-service', outcome: 'ok' }),
    ).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'bus_send_duration_seconds_count', { topic: 'mission.events.v1', result: 'ok' })).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'bus_consumer_lag', { topic: 'mission.requests.v1', group: 'mission-service' })).toBeGreaterThanOrEqual(0);
    // How long the submit (and the reads polling it) waited between the gateway's send and mission-service's handler.
    expect(sample(text, 'bus_delivery_delay_seconds_count', { service: 'mission-service', topic: 'mission.requests.v1', group: 'mission-service' })).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'db_pool_connections', { schema: 'mission', state: 'idle' })).toBeGreaterThanOrEqual(0);
    expect(sample(text, 'outbox_backlog', { schema: 'mission' })).toBe(0);
    expect(sample(text, 'process_resident_memory_bytes', { service: 'mission-service' })).toBeGreaterThan(0);
    expect(text).not.toContain(tenant.body.id);
    expect(text).not.toContain(submitted.body.id);

    const brain = await (await fetch(`${stack.opsUrl('brain-service')}/metrics`)).text();
    expect(sample(brain, 'bus_handle_duration_seconds_count', { service: 'brain-service', topic: 'brain.requests.v1', outcome: 'ok' })).toBeGreaterThanOrEqual(1);
    expect(sample(brain, 'db_pool_connections', { schema: 'brain', state: 'idle' })).toBeGreaterThanOrEqual(0);
    // The merges' backlog: a stored document's chunks wait for a merge, then the series is back at zero.
    const stored = await call(stack.gatewayUrl, 'POST', '/api/brain/documents', { token, body: { title: 'Measured', content: 'Klystrons and magnetrons. '.repeat(400) } });
    expect(stored.status).toBe(201);
    const backlog = async (): Promise<number | undefined> =>
      sample(await (await fetch(`${stack.opsUrl('brain-service')}/metrics`)).text(), 'brain_unmerged_chunks', { schema: 'brain' });
    const deadline = Date.now() + 15_000;
    while ((await backlog()) !== 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await backlog()).toBe(0);

    // The identity provider: token requests by route, its bus (tenant provisioning) and its database pool.
    const idpResponse = await fetch(`${stack.opsUrl('idp')}/metrics`);
    expect(idpResponse.status).toBe(200);
    const idp = await idpResponse.text();
    expect(sample(idp, 'http_server_request_duration_seconds_count', { service: 'idp', method: 'POST', route: '/token', status_code: '200' })).toBeGreaterThanOrEqual(2);
    expect(
      sample(idp, 'http_server_request_duration_seconds_count', { service: 'idp', method: 'GET', route: '/.well-known/openid-configuration', status_code: '200' }),
    ).toBeGreaterThanOrEqual(2);
    expect(sample(idp, 'bus_handle_duration_seconds_count', { service: 'idp', topic: 'identity.requests.v1', outcome: 'ok' })).toBeGreaterThanOrEqual(1);
    expect(sample(idp, 'db_pool_connections', { schema: 'identity', state: 'idle' })).toBeGreaterThanOrEqual(0);
    expect(idp).not.toContain(tenant.body.id);
    expect(idp).not.toContain(tenant.body.client.clientId);
  }, 120_000);

  it('traces a mission from the gateway through Kafka to each service and its queries, under the caller’s trace', async () => {
    const admin = await clientCredentialsToken(stack.issuer, stack.admin.clientId, stack.admin.clientSecret);
    const tenant = await call(stack.gatewayUrl, 'POST', '/admin/tenants', { token: admin.access_token, body: { name: 'Traced', tier: 'business' } });
    const token = (await clientCredentialsToken(stack.issuer, tenant.body.client.clientId, tenant.body.client.clientSecret)).access_token;
    const traceId = '0af7651916cd43dd8448eb211c80319c';
    const callerSpan = 'b7ad6b7169203331';
    const submitted = await call(stack.gatewayUrl, 'POST', '/api/missions', {
      token,
      headers: { traceparent: `00-${traceId}-${callerSpan}-01` },
      body: { title: 'Traced', objective: 'Follow me', steps: [{ type: 'brain.query', query: 'trace' }] },
    });
    expect(submitted.status).toBe(202);
    expect((await waitForMission(stack.gatewayUrl, token, submitted.body.id)).status).toBe('succeeded');

    // Exports are batched per process: wait until the last hop, brain-service, has sent its span,
    // and mission-service the span it was asked from (which ends only after the answer).
    const spans = await collector.waitForTrace(traceId, (found) => {
      const brain = found.find((span) => span.service === 'brain-service' && span.kind === CONSUMER);
      return brain !== undefined && found.some((span) => span.spanId === brain.parentSpanId);
    });
    const server = spans.find((span) => span.service === 'gateway' && span.kind === SERVER);
    // The gateway's server span continues the caller's trace and is named after the route template.
    expect(server).toMatchObject({ name: 'POST /api/missions', parentSpanId: callerSpan, attributes: expect.objectContaining({ 'http.route': '/api/missions' }) });
    expect(submitted.headers.get('traceparent')).toBe(`00-${traceId}-${server?.spanId}-01`);
    // mission-service processed the request the gateway sent from inside that span, and queried PostgreSQL under it.
    const missionRequest = spans.find((span) => span.service === 'mission-service' && span.kind === CONSUMER && span.name === 'process mission.requests.v1');
    expect(missionRequest).toMatchObject({
      parentSpanId: server?.spanId,
      attributes: expect.objectContaining({ 'messaging.system': 'kafka', 'messaging.destination.name': 'mission.requests.v1' }),
    });
    const queries = spans.filter(
      (span) => span.service === 'mission-service' && (span.attributes['db.system.name'] === 'postgresql' || span.attributes['db.system'] === 'postgresql'),
    );
    expect(queries.some((span) => span.parentSpanId === missionRequest?.spanId)).toBe(true);
    // The rate limiter's Redis calls are part of the gateway's request.
    expect(
      spans.some(
        (span) => span.service === 'gateway' && span.parentSpanId === server?.spanId && (span.attributes['db.system'] === 'redis' || span.attributes['db.system.name'] === 'redis'),
      ),
    ).toBe(true);
    // The work the mission went on to do, through the outbox and the bus, stays in the same trace:
    // brain-service answered a request sent from one of mission-service's spans.
    const brainRequest = spans.find((span) => span.service === 'brain-service' && span.kind === CONSUMER);
    expect(brainRequest?.name).toBe('process brain.requests.v1');
    expect(spans.find((span) => span.spanId === brainRequest?.parentSpanId)?.service).toBe('mission-service');
    // Spans carry ids, never payloads: neither the objective nor a statement's bound values.
    expect(JSON.stringify(spans)).not.toContain('Follow me');
    // Probes and scrapes are not traced.
    expect(collector.spans.some((span) => String(span.attributes['url.path'] ?? span.attributes['http.target'] ?? '').startsWith('/health'))).toBe(false);
  }, 60_000);

  it('records query parameter names but never their values in spans (a Brain search is tenant content)', async () => {
    const admin = await clientCredentialsToken(stack.issuer, stack.admin.clientId, stack.admin.clientSecret);
    const tenant = await call(stack.gatewayUrl, 'POST', '/admin/tenants', { token: admin.access_token, body: { name: 'Searching', tier: 'business' } });
    const token = (await clientCredentialsToken(stack.issuer, tenant.body.client.clientId, tenant.body.client.clientSecret)).access_token;
    const traceId = '1bf7651916cd43dd8448eb211c80319d';
    const secret = 'confidentialmergerplans';
    const searched = await call(stack.gatewayUrl, 'GET', `/api/brain/query?q=${secret}&k=3`, { token, headers: { traceparent: `00-${traceId}-b7ad6b7169203331-01` } });
    expect(searched.status).toBe(200);
    const spans = await collector.waitForTrace(traceId, (found) => found.some((span) => span.service === 'gateway' && span.kind === SERVER));
    const server = spans.find((span) => span.service === 'gateway' && span.kind === SERVER);
    expect(server?.attributes).toMatchObject({ 'url.path': '/api/brain/query', 'url.query': 'q=REDACTED&k=REDACTED' });
    expect(JSON.stringify(spans)).not.toContain(secret);
  }, 60_000);
});
