import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { BusMetrics } from '@mission/messaging';

/** A process's Prometheus registry: Node.js process metrics, every series labelled with the service. */
export function createMetricsRegistry(service: string): Registry {
  const registry = new Registry();
  registry.setDefaultLabels({ service });
  collectDefaultMetrics({ register: registry });
  return registry;
}

const HTTP_SERVER_DURATION = 'http_server_request_duration_seconds';

/**
 * The HTTP server histogram, by method, route template and status code. One per registry: in the
 * all-in-one process the gateway and the identity provider share it (their routes do not overlap).
 * `route` must be a template or a fixed name, never a raw URL (ids would make series unbounded).
 */
export function httpServerMetrics(registry: Registry): Histogram<'method' | 'route' | 'status_code'> {
  const existing = registry.getSingleMetric(HTTP_SERVER_DURATION);
  if (existing) return existing as Histogram<'method' | 'route' | 'status_code'>;
  return new Histogram({
    name: HTTP_SERVER_DURATION,
    help: 'HTTP requests served, by method, route template and status code.',
    labelNames: ['method', 'route', 'status_code'],
    buckets: [0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [registry],
  });
}

/**
 * Seconds: from sub-millisecond in-process hops to Kafka sends waiting out a broker failover, finer
 * below 25 ms, where a request's stages lie and a tail is told apart from the median.
 */
const LATENCY_BUCKETS = [0.0005, 0.001, 0.0015, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/** The bus's metrics on `registry`: send and handling latency by topic and outcome, dead letters, consumer lag. */
export function busMetrics(registry: Registry): BusMetrics {
  const sent = new Histogram({
    name: 'bus_send_duration_seconds',
    help: 'Time until the broker acknowledged (or refused) a send, by topic and result.',
    labelNames: ['topic', 'result'],
    buckets: LATENCY_BUCKETS,
    registers: [registry],
  });
  const requested = new Histogram({
    name: 'bus_request_duration_seconds',
    help: "Requests as their requester saw them, from the request's sealing to its reply (or its failure), by topic and result (ok: a reply came and was read).",
    labelNames: ['topic', 'result'],
    buckets: LATENCY_BUCKETS,
    registers: [registry],
  });
  const handled = new Histogram({
    name: 'bus_handle_duration_seconds',
    help: 'Time to handle a delivered message (retries included), by topic, consumer group and outcome.',
    labelNames: ['topic', 'group', 'outcome'],
    buckets: LATENCY_BUCKETS,
    registers: [registry],
  });
  const delivered = new Histogram({
    name: 'bus_delivery_delay_seconds',
    help: 'Time from a record being sent to its handler starting (broker, fetch and the wait for a handler slot), by topic and consumer group; replies under "replies". Kafka only.',
    labelNames: ['topic', 'group'],
    buckets: LATENCY_BUCKETS,
    registers: [registry],
  });
  // One labelled child per topic and group, found once (prom-client still checks and hashes the labels
  // on each observation: this saves building the label object, not the hashing).
  const deliveredBy = new Map<string, { observe(seconds: number): void }>();
  const deadLetters = new Counter({
    name: 'bus_dead_letters_total',
    help: 'Messages parked in a dead-letter topic (kept failing, or refused for a missing tenant), by topic and group.',
    labelNames: ['topic', 'group'],
    registers: [registry],
  });
  const lag = new Gauge({
    name: 'bus_consumer_lag',
    help: 'Records of a partition its consumer group has not consumed yet, as of the last batch.',
    labelNames: ['topic', 'group', 'partition'],
    registers: [registry],
  });
  /** The lag series each group has set, removed when the group is reassigned. */
  const lagged = new Map<string, Array<{ topic: string; group: string; partition: string }>>();
  return {
    sent: (topic, seconds, ok) => sent.observe({ topic, result: ok ? 'ok' : 'error' }, seconds),
    requested: (topic, seconds, answered) => requested.observe({ topic, result: answered ? 'ok' : 'error' }, seconds),
    handled: (topic, group, seconds, outcome) => {
      handled.observe({ topic, group, outcome }, seconds);
      if (outcome === 'dead-lettered' || outcome === 'refused') deadLetters.inc({ topic, group });
    },
    delivered: (topic, group, seconds) => {
      const key = `${topic}\u0000${group}`;
      let observer = deliveredBy.get(key);
      if (!observer) {
        observer = delivered.labels({ topic, group });
        deliveredBy.set(key, observer);
      }
      observer.observe(seconds);
    },
    lag: (topic, group, partition, records) => {
      const labels = { topic, group, partition: String(partition) };
      lag.set(labels, records);
      lagged.set(group, [...(lagged.get(group) ?? []).filter((known) => known.topic !== topic || known.partition !== labels.partition), labels]);
    },
    assigned: (group) => {
      for (const labels of lagged.get(group) ?? []) lag.remove(labels);
      lagged.delete(group);
    },
  };
}

/** What a database gauge needs of a TypeORM DataSource on node-postgres. */
interface PooledDataSource {
  readonly isInitialized: boolean;
  readonly driver: unknown;
  query(sql: string): Promise<Array<Record<string, unknown>>>;
}

const OUTBOX_QUERY_TIMEOUT_MS = 1_000;

interface DatabaseSource {
  readonly dataSource: PooledDataSource;
  readonly outbox: boolean;
}

/** The databases each registry reports: one gauge per metric, several schemas in one process (npm start). */
const databases = new WeakMap<Registry, Map<string, DatabaseSource>>();

/**
 * Connection-pool usage of a service's database and the rows its outbox has not published yet,
 * read when Prometheus scrapes, labelled by schema.
 */
export function databaseMetrics(registry: Registry, schema: string, dataSource: PooledDataSource, options: { outbox?: boolean } = {}): void {
  const known = databases.get(registry);
  if (known) {
    known.set(schema, { dataSource, outbox: options.outbox ?? false });
    return;
  }
  const sources = new Map<string, DatabaseSource>([[schema, { dataSource, outbox: options.outbox ?? false }]]);
  databases.set(registry, sources);
  const poolOf = (source: DatabaseSource) => (source.dataSource.driver as { master?: { totalCount: number; idleCount: number; waitingCount: number } }).master;
  new Gauge({
    name: 'db_pool_connections',
    help: 'Connections of the database pool, by state (in use, idle, and requests waiting for one).',
    labelNames: ['schema', 'state'],
    registers: [registry],
    collect() {
      for (const [name, source] of sources) {
        const pool = poolOf(source);
        if (!pool) continue;
        this.set({ schema: name, state: 'used' }, pool.totalCount - pool.idleCount);
        this.set({ schema: name, state: 'idle' }, pool.idleCount);
        this.set({ schema: name, state: 'waiting' }, pool.waitingCount);
      }
    },
  });
  new Gauge({
    name: 'outbox_backlog',
    help: 'Outbox rows committed but not yet published to the bus.',
    labelNames: ['schema'],
    registers: [registry],
    async collect() {
      for (const [name, source] of sources) {
        if (!source.outbox || !source.dataSource.isInitialized) continue;
        // A database that is down or slow must not take the rest of /metrics with it: the
        // series is left out of this scrape instead.
        this.remove({ schema: name });
        try {
          const query = source.dataSource.query(`SELECT count(*)::int AS n FROM "${name}".outbox WHERE published_at IS NULL`);
          const timeout = new Promise<never>((_, reject) => setTimeout(() => reject(new Error('timeout')), OUTBOX_QUERY_TIMEOUT_MS).unref());
          const [row] = await Promise.race([query, timeout]);
          this.set({ schema: name }, Number(row?.n ?? 0));
        } catch {
          // unknown this time: no sample
        }
      }
    },
  });
}
