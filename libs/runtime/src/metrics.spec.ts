import { busMetrics, createMetricsRegistry, databaseMetrics } from './metrics';

/** The value of the series `name` whose labels include `labels` (label order does not matter). */
function sample(text: string, name: string, labels: Record<string, string>): number | undefined {
  for (const line of text.split('\n')) {
    const match = /^([a-z_]+)\{(.*)\} (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const found = Object.fromEntries([...match[2].matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
    if (Object.entries(labels).every(([key, value]) => found[key] === value)) return Number(match[3]);
  }
  return undefined;
}

describe('metrics', () => {
  it('labels every series with the service and includes the process metrics', async () => {
    const registry = createMetricsRegistry('hit-service');
    const text = await registry.metrics();
    expect(sample(text, 'process_cpu_user_seconds_total', { service: 'hit-service' })).toBeGreaterThanOrEqual(0);
  });

  it('records bus sends, requests as their requester saw them, handling by outcome, dead letters and consumer lag', async () => {
    const registry = createMetricsRegistry('mission-service');
    const bus = busMetrics(registry);
    bus.sent('mission.events.v1', 0.004, true);
    bus.sent('mission.events.v1', 30, false);
    bus.requested('brain.requests.v1', 0.0012, true);
    bus.requested('brain.requests.v1', 5, false);
    bus.handled('hit.events.v1', 'mission-hit-events', 0.02, 'ok');
    bus.handled('hit.events.v1', 'mission-hit-events', 1.5, 'dead-lettered');
    bus.lag('hit.events.v1', 'mission-hit-events', 3, 42);
    const text = await registry.metrics();
    expect(sample(text, 'bus_send_duration_seconds_count', { service: 'mission-service', topic: 'mission.events.v1', result: 'ok' })).toBe(1);
    expect(sample(text, 'bus_send_duration_seconds_count', { service: 'mission-service', topic: 'mission.events.v1', result: 'error' })).toBe(1);
    expect(sample(text, 'bus_request_duration_seconds_bucket', { le: '0.0015', service: 'mission-service', topic: 'brain.requests.v1', result: 'ok' })).toBe(1);
    expect(sample(text, 'bus_request_duration_seconds_count', { service: 'mission-service', topic: 'brain.requests.v1', result: 'error' })).toBe(1);
    expect(
      sample(text, 'bus_handle_duration_seconds_bucket', { le: '0.025', service: 'mission-service', topic: 'hit.events.v1', group: 'mission-hit-events', outcome: 'ok' }),
    ).toBe(1);
    expect(sample(text, 'bus_dead_letters_total', { service: 'mission-service', topic: 'hit.events.v1', group: 'mission-hit-events' })).toBe(1);
    expect(sample(text, 'bus_consumer_lag', { service: 'mission-service', topic: 'hit.events.v1', group: 'mission-hit-events', partition: '3' })).toBe(42);
    // After a rebalance the group may no longer own partition 3: its last lag is dropped.
    bus.assigned('mission-hit-events');
    expect(sample(await registry.metrics(), 'bus_consumer_lag', { topic: 'hit.events.v1', partition: '3' })).toBeUndefined();
  });

  it('records how long after its send a message reached its handler, by topic and group', async () => {
    const registry = createMetricsRegistry('mission-service');
    const bus = busMetrics(registry);
    bus.delivered('mission.requests.v1', 'mission-service', 0.003);
    bus.delivered('mission.requests.v1', 'mission-service', 0.04);
    bus.delivered('replies', 'replies', 0.002);
    const text = await registry.metrics();
    const labels = { service: 'mission-service', topic: 'mission.requests.v1', group: 'mission-service' };
    expect(sample(text, 'bus_delivery_delay_seconds_count', labels)).toBe(2);
    expect(sample(text, 'bus_delivery_delay_seconds_bucket', { le: '0.005', ...labels })).toBe(1);
    expect(sample(text, 'bus_delivery_delay_seconds_sum', labels)).toBeCloseTo(0.043, 6);
    expect(sample(text, 'bus_delivery_delay_seconds_count', { service: 'mission-service', topic: 'replies', group: 'replies' })).toBe(1);
  });

  it('reads the pool and the outbox backlog when scraped', async () => {
    const registry = createMetricsRegistry('mission-service');
    let backlog = 7;
    const queries: string[] = [];
    databaseMetrics(
      registry,
      'mission',
      {
        isInitialized: true,
        driver: { master: { totalCount: 5, idleCount: 2, waitingCount: 1 } },
        query: async (sql: string) => {
          queries.push(sql);
          return [{ n: backlog }];
        },
      },
      { outbox: true },
    );
    let text = await registry.metrics();
    expect(sample(text, 'db_pool_connections', { service: 'mission-service', schema: 'mission', state: 'used' })).toBe(3);
    expect(sample(text, 'db_pool_connections', { service: 'mission-service', schema: 'mission', state: 'waiting' })).toBe(1);
    expect(sample(text, 'outbox_backlog', { service: 'mission-service', schema: 'mission' })).toBe(7);
    backlog = 0;
    text = await registry.metrics();
    expect(sample(text, 'outbox_backlog', { service: 'mission-service', schema: 'mission' })).toBe(0);
    expect(queries[0]).toContain('"mission".outbox WHERE published_at IS NULL');
  });

  it('leaves the outbox backlog out of a scrape when the database fails, and serves everything else', async () => {
    const registry = createMetricsRegistry('hit-service');
    databaseMetrics(
      registry,
      'hit',
      { isInitialized: true, driver: { master: { totalCount: 2, idleCount: 2, waitingCount: 0 } }, query: async () => Promise.reject(new Error('connection refused')) },
      { outbox: true },
    );
    const text = await registry.metrics();
    expect(sample(text, 'outbox_backlog', { schema: 'hit' })).toBeUndefined();
    expect(sample(text, 'db_pool_connections', { schema: 'hit', state: 'idle' })).toBe(2);
  });
});
