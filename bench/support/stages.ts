/**
 * Where a distributed read's time goes, stage by stage: the servers' own latency histograms
 * (Prometheus, on their operations ports) read before and after a measured run, and the quantiles
 * of what the run added, estimated from the buckets as Prometheus's `histogram_quantile` does
 * (linear within a bucket). A bucket's width bounds what a quantile can say: below 50 ms the bus's
 * histograms have edges at 0.5, 1, 1.5, 2, 3, 5, 7.5, 10, 15 and 25 ms, the HTTP server's at 1,
 * 2.5, 5, 7.5, 10, 15 and 25 ms (libs/runtime/src/metrics.ts).
 */

/** A histogram series: its name, its labels but `le`, and the cumulative count at each upper edge (seconds, ascending, +Inf last). */
export interface HistogramSeries {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly buckets: ReadonlyArray<readonly [upper: number, cumulative: number]>;
}

/** What the stage report reads, by process: histogram names and the labels a series must have. */
export interface StageSpec {
  readonly process: string;
  /** What the stage is, for the report. */
  readonly stage: string;
  readonly metric: string;
  /** Labels a series must have: this value, or a value this pattern matches. */
  readonly labels: Readonly<Record<string, string | RegExp>>;
}

export interface StageResult {
  readonly process: string;
  readonly stage: string;
  /** False when the process's metrics were not read both before and after the run: nothing is said of the stage. */
  readonly scraped: boolean;
  /** Observations the measured run added. */
  readonly count: number;
  /** Milliseconds, estimated from the buckets; null without observations. */
  readonly p50: number | null;
  readonly p90: number | null;
  readonly p99: number | null;
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)_bucket\{(.*)\}\s+(\S+)(?:\s+\d+)?$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

/** The labels of a sample (the text between its braces), values unescaped. */
function labelsOf(text: string): Array<[string, string]> {
  return [...text.matchAll(LABEL)].map(([, key = '', raw = '']) => [key, raw.replace(/\\(.)/g, (_, char: string) => (char === 'n' ? '\n' : char))]);
}

/** The `_bucket` series of Prometheus's text format, one per name and label set (`le` apart). */
export function parseHistograms(text: string): HistogramSeries[] {
  const series = new Map<string, { name: string; labels: Record<string, string>; buckets: Array<[number, number]> }>();
  for (const line of text.split('\n')) {
    const match = SAMPLE.exec(line.trim());
    if (!match) continue;
    const [, name = '', labelText = '', value = ''] = match;
    const labels: Record<string, string> = {};
    let upper: number | undefined;
    for (const [key, value] of labelsOf(labelText)) {
      if (key === 'le') upper = value === '+Inf' ? Infinity : Number(value);
      else labels[key] = value;
    }
    const count = Number(value);
    if (upper === undefined || Number.isNaN(upper) || !Number.isFinite(count)) continue;
    const key = `${name}\u0000${JSON.stringify(Object.entries(labels).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))}`;
    let entry = series.get(key);
    if (!entry) {
      entry = { name, labels, buckets: [] };
      series.set(key, entry);
    }
    entry.buckets.push([upper, count]);
  }
  return [...series.values()].map((entry) => ({ ...entry, buckets: entry.buckets.sort((a, b) => a[0] - b[0]) }));
}

/**
 * The counts `after` added to `before`, per upper edge: a series `before` lacks started at zero,
 * and one whose total fell restarted from zero in between (its process did), so all it holds is new.
 */
export function bucketDelta(before: HistogramSeries | undefined, after: HistogramSeries): Array<[number, number]> {
  const total = (series: HistogramSeries): number => series.buckets[series.buckets.length - 1]?.[1] ?? 0;
  const earlier = new Map(before === undefined || total(after) < total(before) ? [] : before.buckets);
  return after.buckets.map(([upper, count]) => [upper, Math.max(0, count - (earlier.get(upper) ?? 0))]);
}

/**
 * The `q` quantile (0 < q < 1) of cumulative buckets, in the buckets' unit: linear within the
 * bucket that holds it (from 0 for the first); the highest finite edge when it falls in +Inf;
 * null when empty.
 */
export function quantileOf(buckets: ReadonlyArray<readonly [number, number]>, q: number): number | null {
  const total = buckets[buckets.length - 1]?.[1] ?? 0;
  if (total <= 0) return null;
  const rank = q * total;
  let lowerEdge = 0;
  let lowerCount = 0;
  for (const [upper, cumulative] of buckets) {
    if (cumulative >= rank) {
      if (!Number.isFinite(upper)) return lowerEdge;
      const inBucket = cumulative - lowerCount;
      return inBucket <= 0 ? upper : lowerEdge + ((upper - lowerEdge) * (rank - lowerCount)) / inBucket;
    }
    lowerEdge = upper;
    lowerCount = cumulative;
  }
  return lowerEdge;
}

function matches(series: HistogramSeries, spec: StageSpec): boolean {
  return (
    series.name === spec.metric &&
    Object.entries(spec.labels).every(([key, wanted]) => {
      const value = series.labels[key];
      return value !== undefined && (typeof wanted === 'string' ? value === wanted : wanted.test(value));
    })
  );
}

const roundMs = (seconds: number | null): number | null => (seconds === null ? null : Math.round(seconds * 100_000) / 100);

/**
 * Each stage's quantiles over what happened between the two scrapes (by process: the text each
 * served; a process missing from either is not scraped, its stages empty). The series a spec
 * matches are summed (several partitions' or outcomes', say).
 */
export function stageResults(specs: readonly StageSpec[], before: Readonly<Record<string, string>>, after: Readonly<Record<string, string>>): StageResult[] {
  const parsed = (texts: Readonly<Record<string, string>>) => new Map(Object.entries(texts).map(([process, text]) => [process, parseHistograms(text)]));
  const earlier = parsed(before);
  const later = parsed(after);
  return specs.map((spec) => {
    if (!earlier.has(spec.process) || !later.has(spec.process)) return { process: spec.process, stage: spec.stage, scraped: false, count: 0, p50: null, p90: null, p99: null };
    const summed = new Map<number, number>();
    for (const series of (later.get(spec.process) ?? []).filter((candidate) => matches(candidate, spec))) {
      const previous = (earlier.get(spec.process) ?? []).find((candidate) => candidate.name === series.name && sameLabels(candidate.labels, series.labels));
      for (const [upper, count] of bucketDelta(previous, series)) summed.set(upper, (summed.get(upper) ?? 0) + count);
    }
    const buckets = [...summed.entries()].sort((a, b) => a[0] - b[0]);
    return {
      process: spec.process,
      stage: spec.stage,
      scraped: true,
      count: buckets[buckets.length - 1]?.[1] ?? 0,
      p50: roundMs(quantileOf(buckets, 0.5)),
      p90: roundMs(quantileOf(buckets, 0.9)),
      p99: roundMs(quantileOf(buckets, 0.99)),
    };
  });
}

function sameLabels(a: Readonly<Record<string, string>>, b: Readonly<Record<string, string>>): boolean {
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((key) => a[key] === b[key]);
}

/** Each process's metrics text, read at once (in parallel); a process that does not answer is left out. */
export async function scrapeAll(urls: Readonly<Record<string, string>>): Promise<Record<string, string>> {
  const entries = await Promise.all(
    Object.entries(urls).map(async ([process, url]) => {
      try {
        const response = await fetch(url, { signal: AbortSignal.timeout(5_000) });
        return response.ok ? ([process, await response.text()] as const) : undefined;
      } catch {
        return undefined;
      }
    }),
  );
  return Object.fromEntries(entries.filter((entry): entry is readonly [string, string] => entry !== undefined));
}

/** `stage p50 / p90 / p99 ms (count)`, one line per stage. */
export function stageLines(results: readonly StageResult[]): string[] {
  return results.map(
    (result) =>
      `${result.process}: ${result.stage}: ${!result.scraped ? 'not read before and after the run' : result.count === 0 ? 'no observations' : `p50 ${result.p50} / p90 ${result.p90} / p99 ${result.p99} ms (${result.count})`}`,
  );
}

/**
 * A distributed mission read, in the order its time passes: the gateway's whole request (HTTP
 * in to HTTP out); within it the request on the bus as the gateway saw it (from sealing the
 * request to the reply's arrival: the rest is the gateway's own); within that the request's
 * produce (the wait in the bus's sender, then the broker's acknowledgement), the request's way to
 * mission-service's handler (the broker, the fetch, the wait for a handler slot), the handler
 * (decryption, the database read, encryption; answered requests only), the reply's produce (as
 * the request's), and the reply's way back to the gateway's waiting request. A way is timed from
 * the record's timestamp, which kafkajs takes as it encodes the produce request (after the wait in
 * the bus's sender), on the sender's clock and to the millisecond: its quantiles can read up to
 * half a millisecond low, the buckets being finer than the clock. The produce and the way overlap
 * (both hold the broker's append), so stages' medians do not add up to the request's.
 */
export const DISTRIBUTED_READ_STAGES: readonly StageSpec[] = [
  { process: 'gateway', stage: 'request, HTTP in to out', metric: 'http_server_request_duration_seconds', labels: { method: 'GET', route: /\/missions\/:[A-Za-z]+$/ } },
  { process: 'gateway', stage: 'request on the bus, sealing to reply', metric: 'bus_request_duration_seconds', labels: { topic: 'mission.requests.v1', result: 'ok' } },
  { process: 'gateway', stage: 'request produced', metric: 'bus_send_duration_seconds', labels: { topic: 'mission.requests.v1', result: 'ok' } },
  { process: 'mission-service', stage: 'request sent → handler', metric: 'bus_delivery_delay_seconds', labels: { topic: 'mission.requests.v1' } },
  { process: 'mission-service', stage: 'request handled', metric: 'bus_handle_duration_seconds', labels: { topic: 'mission.requests.v1', outcome: /^(ok|error)$/ } },
  { process: 'mission-service', stage: 'reply produced', metric: 'bus_send_duration_seconds', labels: { topic: 'replies', result: 'ok' } },
  { process: 'gateway', stage: 'reply sent → requester', metric: 'bus_delivery_delay_seconds', labels: { topic: 'replies' } },
];

/** What held a process's event loop during a run: its delay (prom-client's monitor, reset at each scrape) and its collections by kind. */
export interface ProcessPauses {
  readonly process: string;
  /** Milliseconds the loop's timer ran late (prom-client's sampled monitor, less its period), over the run; null when not served. */
  readonly loopDelayMs: { readonly p50: number; readonly p99: number; readonly max: number } | null;
  /** Garbage collections during the run by kind (minor, major, incremental, weakcb): how many and their time in ms. */
  readonly gc: Readonly<Record<string, { readonly count: number; readonly ms: number }>>;
}

/**
 * The period of prom-client's event-loop monitor (its default, which the services keep), in ms:
 * what the monitor records is the time between two of its timer's runs, so a loop that is never
 * late records this.
 */
export const LOOP_MONITOR_PERIOD_MS = 10;

const PLAIN_SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$/;

/** Samples named `name` (no `le`), with their labels. */
function samplesOf(text: string, name: string): Array<{ labels: Record<string, string>; value: number }> {
  const found: Array<{ labels: Record<string, string>; value: number }> = [];
  for (const line of text.split('\n')) {
    const match = PLAIN_SAMPLE.exec(line.trim());
    if (!match || match[1] !== name) continue;
    const labels: Record<string, string> = {};
    for (const [key, value] of labelsOf(match[2] ?? '')) labels[key] = value;
    const value = Number(match[3]);
    if (Number.isFinite(value)) found.push({ labels, value });
  }
  return found;
}

/**
 * Each process's pauses over the run: how late the event loop's timer ran, as the scrape after it
 * reads it (the monitor restarts at every scrape, so the one before the run starts it afresh: a
 * third party scraping during the run would cut it short; an idle loop reads up to 1–2 ms at p99), and the
 * collections the run added (`nodejs_gc_duration_seconds`, by kind).
 */
export function pausesOf(before: Readonly<Record<string, string>>, after: Readonly<Record<string, string>>): ProcessPauses[] {
  return Object.entries(after)
    .filter(([process]) => before[process] !== undefined)
    .map(([process, text]) => {
      const gauge = (name: string): number | undefined => samplesOf(text, name)[0]?.value;
      const [p50, p99, max] = ['nodejs_eventloop_lag_p50_seconds', 'nodejs_eventloop_lag_p99_seconds', 'nodejs_eventloop_lag_max_seconds'].map(gauge);
      const ms = (seconds: number): number => Math.round(seconds * 100_000) / 100;
      const byKind = (source: string | undefined, suffix: '_sum' | '_count'): Map<string, number> =>
        new Map(samplesOf(source ?? '', `nodejs_gc_duration_seconds${suffix}`).map(({ labels, value }) => [labels.kind ?? '?', value]));
      const [sums, counts, sumsBefore, countsBefore] = [byKind(text, '_sum'), byKind(text, '_count'), byKind(before[process], '_sum'), byKind(before[process], '_count')];
      const gc: Record<string, { count: number; ms: number }> = {};
      for (const [kind, count] of counts) {
        const added = count - (countsBefore.get(kind) ?? 0);
        if (added > 0) gc[kind] = { count: added, ms: ms((sums.get(kind) ?? 0) - (sumsBefore.get(kind) ?? 0)) };
      }
      const late = (seconds: number): number => Math.max(0, Math.round((seconds * 1000 - LOOP_MONITOR_PERIOD_MS) * 100) / 100);
      return { process, loopDelayMs: p50 === undefined || p99 === undefined || max === undefined ? null : { p50: late(p50), p99: late(p99), max: late(max) }, gc };
    });
}

/** `process: event loop late by p50 / p99 / max ms; GC kind count (ms), …`, one line per process. */
export function pauseLines(pauses: readonly ProcessPauses[]): string[] {
  return pauses.map((entry) => {
    const loop = entry.loopDelayMs
      ? `event loop late by p50 ${entry.loopDelayMs.p50} / p99 ${entry.loopDelayMs.p99} / max ${entry.loopDelayMs.max} ms`
      : "event loop's delay not served";
    const gc = Object.entries(entry.gc)
      .map(([kind, { count, ms }]) => `${kind} ${count} (${ms} ms)`)
      .join(', ');
    return `${entry.process}: ${loop}; GC ${gc || 'none'}`;
  });
}
