/**
 * `npm run bench -- events [--targets=embedded,distributed] [--samples=200] [--streams=1000] [--write]`:
 * push instead of polling, on the embedded and the distributed wiring.
 *
 * - Latency, one approval at a time: a client holds `GET /api/events` open and a webhook receiver
 *   listens on loopback; each sample submits a mission of one approval step, waits for its item,
 *   then approves it. Latency is from sending the approval to the `hit.decided` event arriving on
 *   the stream, and at the receiver (p50, p99). The same again while another tenant's webhook
 *   answers only after 10 s (and is sent an event for every sample): the other tenants' delivery
 *   latency must not change.
 * - Deliveries/s: `--webhooks` webhooks (20) of one tenant subscribed to `mission.completed`, a receiver that
 *   answers at once, and missions submitted by 16 clients for `--duration` seconds (3); deliveries
 *   per second at the receiver from the first to the last.
 * - Memory: what `--streams` open streams (100 per tenant, the per-instance limit) hold in the
 *   gateway (the all-in-one process, embedded): its heap and buffers, read after a full garbage
 *   collection (bench/support/memory-probe.cjs, preloaded into the servers) before the streams
 *   open and while they are open; and its resident memory with them open.
 *
 * - Before all that, on the distributed target, mission reads run until the broker's JIT compilers
 *   are quiet (`--settle`, at most 240 s; 0 skips it), as in the http and missions suites.
 *
 * Results go to bench/results/events-<date>.json and .md with the commit. See bench/README.md.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { finishReport, Harness } from './support/harness';
import type { BrokerSettle } from './support/jit';
import { gitInfo, machineInfo, settleText } from './support/report';
import { percentiles, type Percentiles } from './support/stats';
import { startTarget, type PreparedTarget, type TargetContext } from './support/targets';
import { DEFAULT_SETTLE_SECONDS, nonNegative, TARGET_NAMES, type TargetName } from './support/options';
import { call } from '../test/support/api-client';
import { openEventStream, type OpenStream } from '../test/support/event-stream-client';

const harness = new Harness('bench:events');
const { log, cleanup } = harness;

function option(name: string, fallback: number): number {
  const raw = process.argv.find((arg) => arg.startsWith(`--${name}=`))?.split('=')[1];
  const value = raw === undefined ? fallback : Number(raw);
  if (!Number.isInteger(value) || value < 1) throw new Error(`--${name} must be a positive integer`);
  return value;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
/** Where the servers' memory probe answers (bench/support/memory-probe.cjs); made in main(). */
let memoryDir = '';

/**
 * A receiver on loopback: records when each webhook-id first arrived, and when every request
 * arrived; answers at once, or after `delayMs`.
 */
async function receiver(delayMs = 0): Promise<{ url: string; arrivals: Map<string, number>; times: number[]; count: () => number; close: () => Promise<void> }> {
  const arrivals = new Map<string, number>();
  const times: number[] = [];
  let count = 0;
  const server = http.createServer((request, response) => {
    request.resume();
    request.on('end', () => {
      count++;
      times.push(performance.now());
      const id = String(request.headers['webhook-id']);
      if (!arrivals.has(id)) arrivals.set(id, performance.now());
      setTimeout(() => response.writeHead(204).end(), delayMs);
    });
  });
  // Node's own default, as receivers commonly keep connections 5 s or longer: a hint of one second
  // (what this receiver said before) makes Node's agent close every connection it frees.
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    arrivals,
    times,
    count: () => count,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function tokenOf(target: PreparedTarget, index: number): string {
  const header = target.requests[index]?.headers.authorization;
  if (!header) throw new Error(`The target has no tenant ${index}`);
  return header.replace(/^Bearer /, '');
}

async function until<T>(probe: () => T | undefined | Promise<T | undefined>, what: string, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}`);
    await sleep(2);
  }
}

interface LatencyRun {
  readonly samples: number;
  readonly streamMs: Percentiles;
  readonly webhookMs: Percentiles;
}

/** `samples` approvals one at a time; from sending each approval to its hit.decided on the stream and at the receiver. */
async function latency(target: PreparedTarget, token: string, samples: number, hookUrl: string, arrivals: Map<string, number>, beside?: () => Promise<void>): Promise<LatencyRun> {
  const hook = await call(target.origin, 'POST', '/api/webhooks', { token, body: { url: hookUrl, events: ['hit.decided'] } });
  if (hook.status !== 201) throw new Error(`Registering the webhook answered ${hook.status}: ${JSON.stringify(hook.body)}`);
  const stream: OpenStream = await openEventStream(target.origin, '/api/events?types=hit.created,hit.decided', { token });
  if (stream.status !== 200) throw new Error(`The stream answered ${stream.status}`);
  const streamMs: number[] = [];
  const webhookMs: number[] = [];
  try {
    for (let sample = 0; sample < samples; sample++) {
      const submitted = await call(target.origin, 'POST', '/api/missions', { token, body: { title: 'Bench', objective: 'Push', steps: [{ type: 'approval', title: 'Go?' }] } });
      if (submitted.status !== 202) throw new Error(`Submitting answered ${submitted.status}`);
      const missionId = submitted.body.id as string;
      const created = await until(() => stream.events.find((event) => event.event === 'hit.created' && event.data.data.missionId === missionId), 'hit.created');
      await beside?.();
      const sent = performance.now();
      const approved = await call(target.origin, 'POST', `/api/hit/${created.data.data.hitId}/approve`, { token });
      if (approved.status !== 200) throw new Error(`Approving answered ${approved.status}`);
      const decided = await until(() => stream.events.find((event) => event.event === 'hit.decided' && event.data.data.missionId === missionId), 'hit.decided');
      const streamedAt = performance.now();
      const deliveredAt = await until(() => arrivals.get(decided.id), 'the webhook delivery');
      // The stream's arrival is when the waiting loop saw it: at most its 2 ms poll late.
      streamMs.push(streamedAt - sent);
      webhookMs.push(deliveredAt - sent);
    }
  } finally {
    stream.close();
    await call(target.origin, 'DELETE', `/api/webhooks/${hook.body.id}`, { token });
  }
  return { samples, streamMs: percentiles(streamMs), webhookMs: percentiles(webhookMs) };
}

/** Deliveries per second to `webhooks` webhooks of one tenant while 16 clients submit missions for `seconds`. */
async function deliveries(
  target: PreparedTarget,
  token: string,
  webhooks: number,
  seconds: number,
): Promise<{ deliveries: number; seconds: number; perSecond: number; missions: number }> {
  const fast = await receiver();
  const ids: string[] = [];
  try {
    for (let index = 0; index < webhooks; index++) {
      const hook = await call(target.origin, 'POST', '/api/webhooks', { token, body: { url: `${fast.url}?n=${index}`, events: ['mission.completed'] } });
      if (hook.status !== 201) throw new Error(`Registering webhook ${index} answered ${hook.status}`);
      ids.push(hook.body.id);
    }
    let missions = 0;
    const end = performance.now() + seconds * 1000;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (performance.now() < end) {
          const submitted = await call(target.origin, 'POST', '/api/missions', { token, body: { title: 'Bench', objective: 'Deliver', steps: [{ type: 'brain.query' }] } });
          if (submitted.status === 202) missions++;
        }
      }),
    );
    const expected = missions * webhooks;
    await until(() => (fast.count() >= expected ? true : undefined), `${expected} deliveries`, 600_000);
    // Every request: the same event goes to each of the webhooks under the same webhook-id.
    const times = [...fast.times].sort((a, b) => a - b);
    const span = ((times.at(-1) ?? 0) - (times[0] ?? 0)) / 1000;
    return { deliveries: times.length, seconds: Math.round(span * 10) / 10, perSecond: Math.round(times.length / span), missions };
  } finally {
    for (const id of ids) await call(target.origin, 'DELETE', `/api/webhooks/${id}`, { token });
    await fast.close();
  }
}

/** What a server holds once all its garbage is collected (bench/support/memory-probe.cjs). */
interface CollectedMemory {
  readonly rss: number;
  readonly heapUsed: number;
  readonly external: number;
}

/** Asks server `pid` to collect its garbage and report its memory, and waits for the answer. */
async function collectedMemory(pid: number): Promise<CollectedMemory> {
  // Without the probe, SIGUSR2 would end the server.
  if (!existsSync(path.join(memoryDir, `${pid}.ready`))) throw new Error(`Server ${pid} runs without the memory probe`);
  const file = path.join(memoryDir, `${pid}.json`);
  rmSync(file, { force: true });
  process.kill(pid, 'SIGUSR2');
  const deadline = performance.now() + 30_000;
  while (!existsSync(file)) {
    if (performance.now() > deadline) throw new Error(`Server ${pid} did not report its memory within 30 s`);
    await sleep(50);
  }
  return JSON.parse(readFileSync(file, 'utf8')) as CollectedMemory;
}

const MiB = 1024 * 1024;
const perThousand = (bytes: number, count: number): number => Math.round(((bytes / MiB) * 1000) / count);

/**
 * What `count` open streams (100 per tenant) hold in the gateway: its heap and buffers after a full
 * collection, before the streams open and while they are open. Its resident memory at the same two
 * moments is reported beside, not as the streams' cost: it may fall between them, as the
 * allocator hands back what the earlier phases freed (-65 and -22 MiB in events-2026-11-27-fast-machine.json).
 */
async function streamMemory(
  target: PreparedTarget,
  count: number,
): Promise<{ streams: number; beforeMiB: number; afterMiB: number; residentChangePerThousandMiB: number; livePerThousandMiB: number }> {
  const pid = target.servers.gateway ?? target.servers.standalone;
  if (pid === undefined) throw new Error(`No gateway process among ${Object.keys(target.servers).join(', ')}`);
  await sleep(2_000);
  const before = await collectedMemory(pid);
  const streams: OpenStream[] = [];
  try {
    for (let index = 0; index < count; index++) {
      const stream = await openEventStream(target.origin, '/api/events', { token: tokenOf(target, Math.floor(index / 100)) });
      if (stream.status !== 200) throw new Error(`Stream ${index} answered ${stream.status}: ${JSON.stringify(stream.body)}`);
      streams.push(stream);
    }
    await sleep(3_000);
    const after = await collectedMemory(pid);
    return {
      streams: count,
      beforeMiB: Math.round(before.rss / MiB),
      afterMiB: Math.round(after.rss / MiB),
      residentChangePerThousandMiB: perThousand(after.rss - before.rss, count),
      livePerThousandMiB: perThousand(after.heapUsed + after.external - (before.heapUsed + before.external), count),
    };
  } finally {
    for (const stream of streams) stream.close();
  }
}

async function main(): Promise<number> {
  const samples = option('samples', 200);
  const streams = option('streams', 1000);
  const duration = option('duration', 3);
  const webhookCount = option('webhooks', 20);
  // As in the other suites: a fresh broker's JIT compilers settle under load before anything is measured.
  const settleRaw = process.argv.find((arg) => arg.startsWith('--settle='))?.slice('--settle='.length) ?? (process.env.BENCH_SETTLE || undefined);
  const settleSeconds = settleRaw === undefined ? DEFAULT_SETTLE_SECONDS : nonNegative('--settle / BENCH_SETTLE', settleRaw);
  const targets = (process.argv
    .find((arg) => arg.startsWith('--targets='))
    ?.split('=')[1]
    ?.split(',') ?? ['embedded', 'distributed']) as TargetName[];
  for (const name of targets)
    if (!TARGET_NAMES.includes(name) || name === 'baseline' || name === 'kafka-floor') throw new Error(`--targets: embedded and/or distributed, not ${name}`);
  const startedAt = new Date();
  const machine = machineInfo();
  // --cpu-prof[=dir], --alloc-prof[=dir]: the servers' profiles, as in the other suites.
  const profileDir = (flag: string): string | undefined =>
    process.argv.find((arg) => arg.startsWith(`${flag}=`))?.slice(flag.length + 1) ?? (process.argv.includes(flag) ? '' : undefined);
  const profiling = harness.serverEnv({ cpuProfDir: profileDir('--cpu-prof'), allocProfDir: profileDir('--alloc-prof') });
  memoryDir = mkdtempSync(path.join(os.tmpdir(), 'mission-bench-memory-'));
  cleanup.add('memory probe directory', () => rm(memoryDir, { recursive: true, force: true }));
  const context: TargetContext = {
    cleanup,
    log,
    tenants: Math.max(2, Math.ceil(streams / 100)),
    serverEnv: {
      // Receivers listen on loopback, which webhooks may reach only with this (local benchmarks, never production).
      WEBHOOKS_ALLOW_PRIVATE: 'true',
      ...profiling,
      // Every server reports its memory after a full collection when asked (the streams' cost).
      NODE_OPTIONS: [profiling.NODE_OPTIONS ?? process.env.NODE_OPTIONS, `--require ${JSON.stringify(path.join(__dirname, 'support', 'memory-probe.cjs'))}`]
        .filter(Boolean)
        .join(' '),
      MISSION_BENCH_MEMORY_DIR: memoryDir,
    },
  };
  const results: Record<string, unknown> = {};
  for (const name of targets) {
    log(`${name}: starting`);
    const target = await startTarget(name, context);
    log(`${name}: up after ${target.startupSeconds.toFixed(1)} s`);
    const hooks = await receiver();
    const slow = await receiver(10_000);
    try {
      const token = tokenOf(target, 0);
      const brokerSettle = await harness.settleBroker(target, settleSeconds);
      log(`${name}: ${samples} approvals, warm-up first`);
      await latency(target, token, Math.min(50, samples), hooks.url, hooks.arrivals);
      const quiet = await latency(target, token, samples, hooks.url, hooks.arrivals);
      log(`${name}: stream p50 ${quiet.streamMs.p50} ms, webhook p50 ${quiet.webhookMs.p50} ms`);
      // Another tenant's endpoint that takes 10 s, sent an event before each sample.
      const otherToken = tokenOf(target, 1);
      const slowHook = await call(target.origin, 'POST', '/api/webhooks', { token: otherToken, body: { url: slow.url, events: ['mission.completed'] } });
      const burden = async (): Promise<void> => {
        await call(target.origin, 'POST', `/api/webhooks/${slowHook.body.id}/test`, { token: otherToken });
      };
      const beside = await latency(target, token, samples, hooks.url, hooks.arrivals, burden);
      log(`${name}: with a 10 s endpoint beside: webhook p50 ${beside.webhookMs.p50} ms`);
      await call(target.origin, 'DELETE', `/api/webhooks/${slowHook.body.id}`, { token: otherToken });
      const throughput = await deliveries(target, token, webhookCount, duration);
      log(`${name}: ${throughput.perSecond} deliveries/s`);
      const memory = await streamMemory(target, streams);
      log(
        `${name}: ${streams} streams: heap and buffers ${memory.livePerThousandMiB >= 0 ? '+' : ''}${memory.livePerThousandMiB} MiB per 1,000 after a full collection; resident ${memory.beforeMiB} → ${memory.afterMiB} MiB`,
      );
      results[name] = { startupSeconds: Math.round(target.startupSeconds * 10) / 10, brokerSettle, latency: quiet, latencyBesideSlowEndpoint: beside, throughput, memory };
    } finally {
      await hooks.close();
      await slow.close();
      const unclean = await target.stop();
      if (unclean.length > 0) log(`${name}: not every process exited cleanly: ${unclean.join(', ')}`);
    }
  }
  const report = {
    schema: 1,
    suite: 'events',
    date: startedAt.toISOString().slice(0, 10),
    startedAt: startedAt.toISOString(),
    git: gitInfo(),
    machine,
    parameters: { samples, streams, duration, webhooks: webhookCount, settleSeconds },
    results,
    ok: true,
  };
  const rows = Object.entries(results).map(([name, value]) => {
    const r = value as {
      latency: LatencyRun;
      latencyBesideSlowEndpoint: LatencyRun;
      throughput: { perSecond: number };
      memory: { livePerThousandMiB: number; afterMiB: number };
    };
    return `| ${name} | ${r.latency.streamMs.p50} / ${r.latency.streamMs.p99} | ${r.latency.webhookMs.p50} / ${r.latency.webhookMs.p99} | ${r.latencyBesideSlowEndpoint.webhookMs.p50} / ${r.latencyBesideSlowEndpoint.webhookMs.p99} | ${r.throughput.perSecond} | ${r.memory.livePerThousandMiB} | ${r.memory.afterMiB} |`;
  });
  const table = [
    '| target | stream p50 / p99 ms | webhook p50 / p99 ms | webhook beside a 10 s endpoint p50 / p99 ms | deliveries/s | MiB held per 1,000 streams | gateway resident MiB with them open |',
    '|---|--:|--:|--:|--:|--:|--:|',
    ...rows,
  ].join('\n');
  const settle = settleText(
    Object.entries(results).map(([name, value]) => ({ name, brokerSettle: (value as { brokerSettle: BrokerSettle | null }).brokerSettle })),
    settleSeconds,
  );
  const markdown = `# Events benchmark, ${report.date} (${report.git.commit ?? 'unknown commit'})\n\n${table}\n${settle ? `\n${settle}\n` : ''}`;
  return finishReport({ write: process.argv.includes('--write') }, `events-${report.date}`, report, markdown, table, '', log);
}

harness.run(main);
