import autocannon from 'autocannon';
import { latencySummary, perSecondStats, Samples } from './load-stats';
import { type Pacing, runPacedLoad, stopPacedLoad } from './paced-load';

/** One request of the load, with the body its response must carry (anything else is a mismatch). */
export interface LoadRequest {
  readonly path: string;
  readonly headers: Record<string, string>;
  readonly body: string;
}

export interface LoadSettings {
  /** http://host:port */
  readonly origin: string;
  /** Each connection sends these in turn. */
  readonly requests: readonly LoadRequest[];
  readonly connections: number;
  readonly pipelining: number;
  /**
   * Offered req/s over all connections, evenly spaced, latencies from when each request was due
   * (paced-load.ts); undefined: closed loop, as fast as answered.
   */
  readonly rate?: number;
  readonly durationSeconds: number;
  readonly timeoutSeconds: number;
}

export interface LoadResult {
  readonly durationSeconds: number;
  readonly responses: number;
  readonly ok: number;
  readonly non2xx: number;
  readonly errors: number;
  readonly timeouts: number;
  readonly mismatches: number;
  readonly resets: number;
  readonly statusCodes: Record<string, number>;
  /** First few distinct error messages, for the report. */
  readonly errorSamples: string[];
  /** 2xx responses completed in each full second of the run. */
  readonly perSecond: number[];
  readonly requestsPerSecond: { readonly mean: number; readonly median: number; readonly min: number; readonly max: number; readonly stddev: number };
  /** Milliseconds, exact (from every 2xx response), not autocannon's whole-millisecond histogram. */
  readonly latencyMs: { readonly mean: number; readonly p50: number; readonly p90: number; readonly p99: number; readonly max: number };
  /** Present for a paced run (`rate`): what was offered and how closely it was kept. */
  readonly pacing?: Pacing;
  /** autocannon's own summary, for cross-checking (its latencies are whole milliseconds); absent for a paced run. */
  readonly autocannon?: { readonly requestsMean: number; readonly requestsP50: number; readonly latencyP50: number; readonly latencyP99: number };
}

let current: autocannon.Instance | undefined;

/** Stops the run in progress, if any (for Ctrl-C). */
export function stopLoad(): void {
  current?.stop();
  stopPacedLoad();
}

/**
 * One autocannon run in this process. Every response's latency (float milliseconds) and the
 * second it completed in are recorded by a listener, which costs a few array writes per
 * response: percentiles are exact and req/s comes from full one-second buckets only.
 */
export async function runLoad(settings: LoadSettings): Promise<LoadResult> {
  if (settings.rate !== undefined) return runPacedLoad({ ...settings, rate: settings.rate });
  const latencies = new Samples();
  const buckets = new Array<number>(settings.durationSeconds + 1).fill(0);
  const errorSamples = new Set<string>();
  // autocannon starts its clock (and its connections) synchronously in this call.
  const startedAt = performance.now();
  const [first, ...more] = settings.requests;
  if (!first) throw new Error('No request to send');
  const target =
    more.length === 0
      ? { url: `${settings.origin}${first.path}`, headers: first.headers, expectBody: first.body }
      : (() => {
          const bodies = new Set(settings.requests.map((request) => request.body));
          return {
            url: settings.origin,
            requests: settings.requests.map((request) => ({ method: 'GET', path: request.path, headers: request.headers })),
            verifyBody: (body: string) => bodies.has(body),
          };
        })();
  const instance = autocannon({
    ...target,
    connections: settings.connections,
    pipelining: settings.pipelining,
    duration: settings.durationSeconds,
    timeout: settings.timeoutSeconds,
  });
  current = instance;
  instance.on('response', (_client, statusCode, _bytes, responseTimeMs) => {
    if (statusCode < 200 || statusCode > 299) return;
    latencies.push(responseTimeMs);
    const second = Math.floor((performance.now() - startedAt) / 1000);
    buckets[Math.min(second, settings.durationSeconds)] += 1;
  });
  instance.on('reqError', (error: Error) => {
    if (errorSamples.size < 5) errorSamples.add(error.message);
  });

  let result: autocannon.Result;
  try {
    result = await instance;
  } finally {
    current = undefined;
  }

  // The last bucket holds what completed after the nominal end (while autocannon stops): partial.
  const perSecond = buckets.slice(0, settings.durationSeconds);
  const statusCodes = Object.fromEntries(Object.entries(result.statusCodeStats).map(([code, stats]) => [code, stats.count]));
  const responses = Object.values(statusCodes).reduce((a, b) => a + b, 0);

  return {
    durationSeconds: settings.durationSeconds,
    responses,
    ok: latencies.length,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    mismatches: result.mismatches,
    resets: result.resets,
    statusCodes,
    errorSamples: [...errorSamples],
    perSecond,
    requestsPerSecond: perSecondStats(perSecond),
    latencyMs: latencySummary(latencies.sorted()),
    autocannon: {
      requestsMean: Math.round(result.requests.mean),
      requestsP50: result.requests.p50,
      latencyP50: result.latency.p50,
      latencyP99: result.latency.p99,
    },
  };
}
