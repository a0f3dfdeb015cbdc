import { Client, errors as undiciErrors } from 'undici';
import type { LoadResult, LoadSettings } from './load';
import { latencySummary, percentile, perSecondStats, round2, Samples } from './load-stats';

/**
 * An open-loop load: requests are due at evenly spaced instants (`rate` per second over all
 * connections), whatever the server does, and each latency runs from the instant its request was
 * due, not from when a free connection sent it. A server that stalls for 200 ms is charged 200 ms
 * on every request due meanwhile, as a client with that arrival rate would see it; a closed loop
 * (or autocannon's `overallRate`, which sends each second's share back to back as soon as the
 * second starts) would charge it to one request per connection (coordinated omission).
 *
 * Requests due while every connection is busy wait in order for the next free one; requests still
 * waiting when the run ends are never sent and are reported (`unsent`, which flags the run): the
 * server did not keep up with the rate. Requests in flight then may finish (their latencies count);
 * throughput is what was answered within each second of the run. The timeout runs from the send.
 */
export interface PacedSettings extends LoadSettings {
  readonly rate: number;
  /** Called with each 2xx response's latency (ms from when it was due), for callers that pool them. */
  readonly onLatency?: (latencyMs: number) => void;
}

export interface Pacing {
  readonly offeredPerSecond: number;
  /** Due but still waiting for a free connection when the run ended: more load than the server kept up with. */
  readonly unsent: number;
  /** How late requests left this process after they were due (timer granularity, and waiting for a free connection), ms. */
  readonly sendLagMs: { readonly p50: number; readonly p99: number; readonly max: number };
}

let stopCurrent: (() => void) | undefined;

/** Stops the paced run in progress, if any (for Ctrl-C). */
export function stopPacedLoad(): void {
  stopCurrent?.();
}

/**
 * One GET through undici's dispatcher interface: the status and the whole body as text, without
 * the stream and the objects `request()` makes for each response (a third of the client's CPU).
 */
function fetchOnce(client: Client, path: string, headers: Record<string, string>, timeoutMs: number): Promise<{ statusCode: number; body: string }> {
  return new Promise((resolve, reject) => {
    let statusCode = 0;
    const chunks: Buffer[] = [];
    client.dispatch(
      { path, method: 'GET', headers, headersTimeout: timeoutMs, bodyTimeout: timeoutMs },
      {
        onConnect: () => undefined,
        onHeaders: (status: number) => {
          statusCode = status;
          return true;
        },
        onData: (chunk: Buffer) => {
          chunks.push(chunk);
          return true;
        },
        onComplete: () => resolve({ statusCode, body: chunks.length === 1 ? (chunks[0] as Buffer).toString() : Buffer.concat(chunks).toString() }),
        onError: reject,
      },
    );
  });
}

const isTimeout = (error: unknown): boolean => error instanceof undiciErrors.HeadersTimeoutError || error instanceof undiciErrors.BodyTimeoutError;

export async function runPacedLoad(settings: PacedSettings): Promise<LoadResult & { readonly pacing: Pacing }> {
  if (!(settings.rate > 0)) throw new Error('A paced load needs a rate above 0');
  if (settings.pipelining !== 1) throw new Error('A paced load sends one request per connection at a time (pipelining 1)');
  if (settings.requests.length === 0) throw new Error('No request to send');
  const timeoutMs = settings.timeoutSeconds * 1000;
  const clients = Array.from(
    { length: settings.connections },
    () => new Client(settings.origin, { pipelining: 1, headersTimeout: timeoutMs, bodyTimeout: timeoutMs, keepAliveTimeout: 60_000 }),
  );
  const idle = [...clients];
  const intervalMs = 1000 / settings.rate;
  const latencies = new Samples();
  const lags = new Samples();
  const buckets = new Array<number>(settings.durationSeconds).fill(0);
  const statusCodes: Record<string, number> = {};
  const errorSamples = new Set<string>();
  let ok = 0;
  let non2xx = 0;
  let errorCount = 0;
  let timeouts = 0;
  let mismatches = 0;
  let responses = 0;
  let outstanding = 0;
  let stopped = false;

  // Due instants not yet sent, oldest first (a ring would do; the backlog is short unless the server falls behind).
  const backlog: number[] = [];
  let backlogHead = 0;
  let sequence = 0;
  const startAt = performance.now() + 20;
  const endAt = startAt + settings.durationSeconds * 1000;
  let nextDue = startAt;
  let dueCount = 0;
  let finish!: () => void;
  const finished = new Promise<void>((resolve) => (finish = resolve));
  let timer: NodeJS.Timeout | undefined;

  // Done once every instant is due and nothing is in flight: what is still waiting then was never sent.
  const settleIfDone = (): void => {
    if ((stopped || nextDue >= endAt) && outstanding === 0) finish();
  };

  const send = (client: Client, due: number): void => {
    const request = settings.requests[sequence++ % settings.requests.length] as (typeof settings.requests)[number];
    outstanding++;
    lags.push(performance.now() - due);
    fetchOnce(client, request.path, request.headers, timeoutMs)
      .then(({ statusCode, body }) => {
        const now = performance.now();
        const latency = now - due;
        responses++;
        statusCodes[statusCode] = (statusCodes[statusCode] ?? 0) + 1;
        if (statusCode < 200 || statusCode > 299) {
          non2xx++;
        } else if (body !== request.body) {
          mismatches++;
        } else {
          ok++;
          latencies.push(latency);
          settings.onLatency?.(latency);
          // Throughput is what was answered within each second of the run, as in a closed loop.
          const second = Math.floor((now - startAt) / 1000);
          if (second >= 0 && second < buckets.length) buckets[second] = (buckets[second] as number) + 1;
        }
      })
      .catch((error: unknown) => {
        errorCount++;
        if (isTimeout(error)) timeouts++;
        if (errorSamples.size < 5) errorSamples.add(error instanceof Error ? error.message : String(error));
      })
      .finally(() => {
        outstanding--;
        idle.push(client);
        dispatch();
        settleIfDone();
      });
  };

  // Connections are taken in turn (first in, first out), so every one of them stays warm.
  const dispatch = (): void => {
    if (stopped || performance.now() >= endAt) return;
    while (backlogHead < backlog.length && idle.length > 0) send(idle.shift() as Client, backlog[backlogHead++] as number);
    if (backlogHead === backlog.length && backlogHead > 0) {
      backlog.length = 0;
      backlogHead = 0;
    }
  };

  const tick = (): void => {
    timer = undefined;
    if (stopped) return;
    const now = performance.now();
    while (nextDue <= now && nextDue < endAt) {
      backlog.push(nextDue);
      nextDue = startAt + ++dueCount * intervalMs;
    }
    dispatch();
    if (nextDue < endAt) timer = setTimeout(tick, Math.max(0, nextDue - performance.now()));
    else settleIfDone();
  };

  stopCurrent = () => {
    stopped = true;
    if (timer) clearTimeout(timer);
    // Requests in flight fail at once (counted as errors) instead of running to their timeout.
    for (const client of clients) void client.destroy().catch(() => undefined);
    settleIfDone();
  };
  // Requests in flight at the end have their timeout to answer; a run cannot last longer than that.
  const deadline = setTimeout(() => stopCurrent?.(), endAt - performance.now() + timeoutMs + 1000);
  timer = setTimeout(tick, Math.max(0, startAt - performance.now()));
  try {
    await finished;
  } finally {
    stopCurrent = undefined;
    clearTimeout(deadline);
    if (timer) clearTimeout(timer);
    await Promise.allSettled(clients.map((client) => client.destroy()));
  }

  const unsent = backlog.length - backlogHead;
  const lagSorted = lags.sorted();
  return {
    durationSeconds: settings.durationSeconds,
    responses,
    ok,
    non2xx,
    errors: errorCount,
    timeouts,
    mismatches,
    resets: 0,
    statusCodes,
    errorSamples: [...errorSamples],
    perSecond: buckets,
    requestsPerSecond: perSecondStats(buckets),
    latencyMs: latencySummary(latencies.sorted()),
    pacing: {
      offeredPerSecond: settings.rate,
      unsent,
      sendLagMs: { p50: round2(percentile(lagSorted, 0.5)), p99: round2(percentile(lagSorted, 0.99)), max: round2(lagSorted[lagSorted.length - 1] ?? NaN) },
    },
  };
}
