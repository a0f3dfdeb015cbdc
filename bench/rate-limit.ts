/**
 * The cost of per-tenant rate limits: the limiter on versus off in one run, on the embedded
 * gateway (buckets in memory) and on the Redis-backed one, with the Redis commands each request
 * costs (INFO commandstats). Targets: at most 0.2 ms added at p50, at most one Redis command per
 * request (fewer when one tenant's requests arrive in the same turn: they share one script call).
 *
 *   node -r ./tools/register.cjs bench/rate-limit.ts [--paired=60] [--workers=2] [--rounds=3]
 *        [--duration=5] [--warmup=3] [--rate=150] [--connections=8] [--micro=20000] [--write]
 *
 * Four all-in-one servers (apps/standalone) run side by side, each with its own embedded
 * PostgreSQL: embedded off/on, Redis-backed off/on (a redis-server of this run's own, so its
 * command counts are ours alone). Each serves GET /api/missions/:id of a finished mission to an
 * enterprise tenant whose limit (1,000,000/min) is never reached, so the limiter does all its work
 * and never refuses. The added latency comes from paired sampling: sequential clients send one
 * request to every server in turn, and the differences within each such cycle cancel the noise of
 * a shared machine. The two "off" servers are the same program: their difference is the noise
 * floor. Paced rounds (rotating order; support/paced-load.ts: evenly spaced requests, latency
 * from when each was due) then give latency under load; the Redis
 * commands per request are INFO commandstats over the requests the limiter decided (its
 * /metrics). A micro-benchmark times the limiter alone (consume()) on both stores.
 */
import { ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { freePort } from '@mission/persistence';
import { MemoryRateLimiter, RateLimiter, RedisRateLimiter } from '@mission/rate-limit';
import { OwnRedisServer, startOwnRedisServer } from '@mission/rate-limit/testing';
import { call, clientCredentialsToken, waitForMission } from '../test/support/api-client';
import { Samples } from './support/load-stats';
import { runPacedLoad } from './support/paced-load';

const REPO_ROOT = path.join(__dirname, '..');

interface Options {
  /** Seconds of paired sampling (the added-latency figure). */
  readonly pairedSeconds: number;
  /** Concurrent sequential clients of the paired sampling. */
  readonly workers: number;
  /** Paced rounds (latency under load). */
  readonly rounds: number;
  readonly durationSeconds: number;
  readonly warmupSeconds: number;
  readonly rate: number;
  readonly connections: number;
  readonly microCalls: number;
  readonly write: boolean;
}

function parseOptions(argv: readonly string[]): Options {
  const values = new Map(argv.map((arg) => /^--([a-z]+)(?:=(.*))?$/.exec(arg)).map((match) => [match?.[1] ?? '', match?.[2] ?? 'true']));
  const known = ['paired', 'workers', 'rounds', 'duration', 'warmup', 'rate', 'connections', 'micro', 'write'];
  const unknown = [...values.keys()].filter((key) => !known.includes(key));
  if (unknown.length > 0) throw new Error(`Unknown option(s): ${unknown.join(', ')}; known: ${known.map((key) => `--${key}`).join(' ')}`);
  const number = (name: string, fallback: number): number => {
    const raw = values.get(name);
    const value = raw === undefined ? fallback : Number(raw);
    if (!Number.isFinite(value) || value <= 0) throw new Error(`--${name} must be a positive number`);
    return value;
  };
  return {
    pairedSeconds: number('paired', 60),
    workers: number('workers', 2),
    rounds: number('rounds', 3),
    durationSeconds: number('duration', 5),
    warmupSeconds: number('warmup', 3),
    rate: number('rate', 150),
    connections: number('connections', 8),
    microCalls: number('micro', 20_000),
    write: values.has('write'),
  };
}

const log = (message: string): void => {
  process.stderr.write(`[bench:rate-limit] ${message}\n`);
};

const round2 = (value: number): number => Math.round(value * 100) / 100;
const round3 = (value: number): number => Math.round(value * 1000) / 1000;

function percentile(sorted: ArrayLike<number>, fraction: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(fraction * sorted.length) - 1))] ?? NaN;
}

/** Everything started here, stopped in reverse order whatever happens. */
const cleanups: Array<() => Promise<void>> = [];
async function cleanUp(): Promise<void> {
  for (const step of cleanups.splice(0).reverse()) await step().catch((error: unknown) => log(`clean-up step failed: ${String(error)}`));
}

interface Target {
  readonly name: string;
  readonly wiring: 'embedded' | 'redis';
  readonly limiter: 'on' | 'off';
  readonly env: Record<string, string>;
}

interface RunningTarget extends Target {
  readonly url: string;
  /** The operations port: /metrics and the readiness details. */
  readonly opsUrl: string;
  readonly path: string;
  readonly headers: Record<string, string>;
  readonly body: string;
}

function startServer(name: string, env: Record<string, string>): ChildProcess {
  const child = spawn(process.execPath, ['-r', './tools/register.cjs', 'apps/standalone/src/main.ts'], {
    cwd: REPO_ROOT,
    env: {
      ...process.env,
      NODE_ENV: 'production',
      LOG_LEVEL: 'warn',
      DATABASE_URL: '',
      KAFKA_BROKERS: '',
      ADMIN_CLIENT_ID: '',
      ADMIN_CLIENT_SECRET: '',
      PUBLIC_URL: '',
      IDP_ISSUER: '',
      ...env,
    },
    stdio: ['ignore', 'ignore', 'pipe'],
    // Its own process group: the embedded PostgreSQL goes down with it if it has to be killed.
    detached: true,
  });
  let output = '';
  child.stderr?.on('data', (chunk: Buffer) => (output = (output + chunk.toString('utf8')).slice(-10_000)));
  child.once('exit', (code) => {
    if (code !== 0 && code !== null) log(`${name} exited with ${code}:\n${output}`);
  });
  return child;
}

async function stopServer(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.pid === undefined) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  const timer = setTimeout(() => {
    try {
      process.kill(-(child.pid ?? 0), 'SIGKILL');
    } catch {
      // already gone
    }
  }, 30_000);
  await exited;
  clearTimeout(timer);
}

async function waitReady(url: string, child: ChildProcess): Promise<void> {
  const deadline = Date.now() + 180_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`The server for ${url} exited with ${child.exitCode}`);
    try {
      if ((await fetch(`${url}/health/ready`, { signal: AbortSignal.timeout(2_000) })).status === 200) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`${url} not ready after 180 s`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/** A standalone server with a finished mission of an enterprise tenant that is never limited. */
async function startTarget(target: Target): Promise<RunningTarget> {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'mission-bench-rate-limit-'));
  cleanups.push(() => rm(dataDir, { recursive: true, force: true }));
  const [port, idpPort, opsPort] = [await freePort(), await freePort(), await freePort()];
  const child = startServer(target.name, { ...target.env, HOST: '127.0.0.1', PORT: String(port), IDP_PORT: String(idpPort), OPS_PORT: String(opsPort), DATA_DIR: dataDir });
  const opsUrl = `http://127.0.0.1:${opsPort}`;
  cleanups.push(() => stopServer(child));
  const url = `http://127.0.0.1:${port}`;
  const issuer = `http://127.0.0.1:${idpPort}`;
  await waitReady(url, child);

  const admin = JSON.parse(await readFile(path.join(dataDir, 'admin-client.json'), 'utf8')) as { clientId: string; clientSecret: string };
  const adminToken = (await clientCredentialsToken(issuer, admin.clientId, admin.clientSecret)).access_token;
  const tenant = await call(url, 'POST', '/admin/tenants', { token: adminToken, body: { name: 'Benchmark', tier: 'enterprise', rpm: 1_000_000 } });
  if (tenant.status !== 201) throw new Error(`${target.name}: creating the tenant answered ${tenant.status}`);
  const token = (await clientCredentialsToken(issuer, tenant.body.client.clientId, tenant.body.client.clientSecret)).access_token;
  const submitted = await call(url, 'POST', '/api/missions', { token, body: { title: 'Benchmark mission', objective: 'What do we know about microwave dielectrics?' } });
  if (submitted.status !== 202) throw new Error(`${target.name}: submitting answered ${submitted.status}`);
  const done = await waitForMission(url, token, submitted.body.id, 60_000);
  if (done.status !== 'succeeded') throw new Error(`${target.name}: the mission ended ${done.status}`);

  const requestPath = `/api/missions/${submitted.body.id}`;
  const headers = { authorization: `Bearer ${token}` };
  const response = await fetch(`${url}${requestPath}`, { headers });
  const body = await response.text();
  const limited = response.headers.get('ratelimit') !== null;
  if (limited !== (target.limiter === 'on')) throw new Error(`${target.name}: RateLimit field ${limited ? 'present' : 'absent'}, limiter ${target.limiter}`);
  const mode = (await call(opsUrl, 'GET', '/health/ready')).body.details.rateLimits.mode;
  const expectedMode = target.limiter === 'off' ? 'off' : target.wiring === 'redis' ? 'redis' : 'memory';
  if (mode !== expectedMode) throw new Error(`${target.name}: rate limits in mode ${mode}, expected ${expectedMode}`);
  return { ...target, url, opsUrl, path: requestPath, headers, body };
}

interface LoadResult {
  readonly ok: number;
  readonly problems: number;
  readonly latencies: Float64Array;
}

async function load(target: RunningTarget, options: Options, seconds: number): Promise<LoadResult> {
  const latencies = new Samples();
  const result = await runPacedLoad({
    origin: target.url,
    requests: [{ path: target.path, headers: target.headers, body: target.body }],
    connections: options.connections,
    pipelining: 1,
    rate: options.rate,
    durationSeconds: Math.max(1, Math.round(seconds)),
    timeoutSeconds: 10,
    onLatency: (latencyMs) => latencies.push(latencyMs),
  });
  return { ok: latencies.length, problems: result.non2xx + result.errors + result.mismatches + result.pacing.unsent, latencies: latencies.toArray() };
}

/** Redis commands by name since the last CONFIG RESETSTAT, without this benchmark's own. */
async function commandCalls(redis: Redis): Promise<Record<string, number>> {
  const info = await redis.info('commandstats');
  return Object.fromEntries(
    [...info.matchAll(/^cmdstat_([a-z|]+):calls=(\d+)/gm)].map((match) => [match[1] ?? '', Number(match[2])]).filter(([name]) => !/^(config|info)/.test(String(name))),
  );
}

/** Requests the server's limiter decided, from its /metrics. */
async function decisions(target: RunningTarget): Promise<number> {
  const text = await (await fetch(`${target.opsUrl}/metrics`)).text();
  return [...text.matchAll(/^rate_limit_decisions_total\{[^}]*\} (\d+)$/gm)].reduce((sum, match) => sum + Number(match[1]), 0);
}

function timedGet(agent: http.Agent, target: RunningTarget): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const request = http.get(`${target.url}${target.path}`, { agent, headers: target.headers }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => {
        const elapsed = performance.now() - started;
        if (response.statusCode !== 200 || Buffer.concat(chunks).toString('utf8') !== target.body) reject(new Error(`${target.name} answered ${response.statusCode}`));
        else resolve(elapsed);
      });
    });
    request.on('error', reject);
  });
}

/**
 * Paired sampling: each worker sends one request to every target in turn (the order rotating),
 * sequentially, so the requests of one cycle meet the same machine within milliseconds. The
 * differences within cycles cancel the noise of a shared machine that rounds of seconds cannot.
 */
async function paired(targets: readonly RunningTarget[], seconds: number, workers: number): Promise<Array<Record<string, number>>> {
  const agents = new Map(targets.map((target) => [target.name, new http.Agent({ keepAlive: true, maxSockets: workers })]));
  const cycles: Array<Record<string, number>> = [];
  const until = performance.now() + seconds * 1000;
  await Promise.all(
    Array.from({ length: workers }, async (_, worker) => {
      for (let cycle = worker; performance.now() < until; cycle++) {
        const sample: Record<string, number> = {};
        for (let i = 0; i < targets.length; i++) {
          const target = targets[(cycle + i) % targets.length] as RunningTarget;
          sample[target.name] = await timedGet(agents.get(target.name) as http.Agent, target);
        }
        cycles.push(sample);
      }
    }),
  );
  for (const agent of agents.values()) agent.destroy();
  return cycles;
}

/** consume() alone, sequentially: microseconds per call. */
async function micro(limiter: RateLimiter, calls: number): Promise<{ p50: number; p99: number; mean: number }> {
  const policy = { name: 'enterprise', limit: 100_000_000 };
  for (let i = 0; i < 2_000; i++) await limiter.consume(`bench:warm-up:${i % 10}`, policy);
  const times = new Float64Array(calls);
  for (let i = 0; i < calls; i++) {
    const started = performance.now();
    await limiter.consume(`bench:tenant:${i % 10}`, policy);
    times[i] = (performance.now() - started) * 1000;
  }
  times.sort();
  return { p50: round2(percentile(times, 0.5)), p99: round2(percentile(times, 0.99)), mean: round2(times.reduce((a, b) => a + b, 0) / calls) };
}

function distribution(values: readonly number[]): { p25: number; p50: number; p75: number } {
  const sorted = [...values].sort((a, b) => a - b);
  return { p25: round3(percentile(sorted, 0.25)), p50: round3(percentile(sorted, 0.5)), p75: round3(percentile(sorted, 0.75)) };
}

async function main(): Promise<void> {
  const options = parseOptions(process.argv.slice(2));
  log(
    `paired sampling ${options.pairedSeconds} s with ${options.workers} worker(s); ${options.rounds} paced round(s) of ${options.durationSeconds} s per target ` +
      `at ${options.rate} req/s over ${options.connections} connections; ${os.cpus().length} cpus, load average ${os.loadavg().map(round2).join(' ')}`,
  );
  const redisServer: OwnRedisServer = await startOwnRedisServer();
  cleanups.push(() => redisServer.kill());
  const redis = new Redis(redisServer.url);
  cleanups.push(async () => redis.disconnect());

  const targets: Target[] = [
    { name: 'embedded, limiter off', wiring: 'embedded', limiter: 'off', env: { RATE_LIMITS: 'off', REDIS_URL: '' } },
    { name: 'embedded, limiter on (memory)', wiring: 'embedded', limiter: 'on', env: { RATE_LIMITS: 'on', REDIS_URL: '' } },
    { name: 'Redis-backed, limiter off', wiring: 'redis', limiter: 'off', env: { RATE_LIMITS: 'off', REDIS_URL: redisServer.url } },
    { name: 'Redis-backed, limiter on (Redis)', wiring: 'redis', limiter: 'on', env: { RATE_LIMITS: 'on', REDIS_URL: redisServer.url } },
  ];
  log('starting four all-in-one servers');
  const running = await Promise.all(targets.map((target) => startTarget(target)));
  const redisOn = running.find((target) => target.wiring === 'redis' && target.limiter === 'on') as RunningTarget;

  for (const target of running) {
    const warm = await load(target, options, options.warmupSeconds);
    log(`${target.name}: warm-up ${warm.ok} × 200, ${warm.problems} problem(s)`);
  }
  await redis.config('RESETSTAT');
  const decisionsBefore = await decisions(redisOn);

  log(`paired sampling for ${options.pairedSeconds} s`);
  const cycles = await paired(running, options.pairedSeconds, options.workers);
  const pairedSummary = running.map((target) => ({ target: target.name, samples: cycles.length, ...distribution(cycles.map((cycle) => cycle[target.name] ?? NaN)) }));
  const difference = (a: Target, b: Target) => distribution(cycles.map((cycle) => (cycle[a.name] ?? NaN) - (cycle[b.name] ?? NaN)));
  const byKind = (wiring: string, limiter: string) => running.find((target) => target.wiring === wiring && target.limiter === limiter) as RunningTarget;
  const pairedAdded = {
    embedded: difference(byKind('embedded', 'on'), byKind('embedded', 'off')),
    redis: difference(byKind('redis', 'on'), byKind('redis', 'off')),
    noiseFloor: difference(byKind('redis', 'off'), byKind('embedded', 'off')),
  };
  log(`paired: ${cycles.length} cycles; added at p50 of the differences: embedded ${pairedAdded.embedded.p50} ms, Redis ${pairedAdded.redis.p50} ms`);

  const latencies = new Map<string, Float64Array[]>(running.map((target) => [target.name, []]));
  const problems = new Map<string, number>(running.map((target) => [target.name, 0]));
  for (let round = 0; round < options.rounds; round++) {
    const order = running.map((_, index) => running[(index + round) % running.length] as RunningTarget);
    for (const target of order) {
      const result = await load(target, options, options.durationSeconds);
      const sorted = result.latencies.sort();
      latencies.get(target.name)?.push(sorted);
      problems.set(target.name, (problems.get(target.name) ?? 0) + result.problems);
      log(`round ${round + 1}, ${target.name}: ${result.ok} × 200, p50 ${round3(percentile(sorted, 0.5))} ms, p99 ${round3(percentile(sorted, 0.99))} ms`);
    }
  }
  // Requests still in flight when a load stopped are decided all the same.
  await new Promise((resolve) => setTimeout(resolve, 500));
  const decided = (await decisions(redisOn)) - decisionsBefore;
  const redisCalls = await commandCalls(redis);

  const underLoad = running.map((target) => {
    const all = Float64Array.from((latencies.get(target.name) ?? []).flatMap((part) => [...part])).sort();
    return {
      target: target.name,
      responses: all.length,
      problems: problems.get(target.name) ?? 0,
      p50: round3(percentile(all, 0.5)),
      p90: round3(percentile(all, 0.9)),
      p99: round3(percentile(all, 0.99)),
    };
  });
  const scriptCalls = (redisCalls.time ?? 0) + (redisCalls.get ?? 0) + (redisCalls.set ?? 0);
  const clientCommands = Object.entries(redisCalls)
    .filter(([name]) => !['time', 'get', 'set'].includes(name))
    .reduce((sum, [, calls]) => sum + calls, 0);
  const commands = {
    requests: decided,
    calls: redisCalls,
    clientCommandsPerRequest: round3(clientCommands / decided),
    scriptInternalCallsPerRequest: round3(scriptCalls / decided),
  };

  log(`micro-benchmark: ${options.microCalls} sequential consume() calls per store`);
  const memoryLimiter = new MemoryRateLimiter();
  const redisLimiter = new RedisRateLimiter({ url: redisServer.url, replicas: 1, logger: { info: log, warn: log } });
  await redisLimiter.start();
  const microResults = { memoryMicros: await micro(memoryLimiter, options.microCalls), redisMicros: await micro(redisLimiter, options.microCalls) };
  await memoryLimiter.close();
  await redisLimiter.close();

  const report = {
    date: new Date().toISOString(),
    machine: { cpus: os.cpus().length, model: os.cpus()[0]?.model, node: process.version, loadAverage: os.loadavg().map(round2) },
    parameters: { ...options, request: 'GET /api/missions/:id (enterprise tenant, 1,000,000/min: never refused)', server: 'apps/standalone' },
    paired: { latency: pairedSummary, added: pairedAdded },
    underLoad,
    redisCommands: commands,
    micro: microResults,
  };

  const lines = [
    `Paired sampling (${cycles.length} cycles, ${options.workers} sequential clients, one request to each server per cycle):`,
    '',
    `| target | p25 ms | p50 ms | p75 ms |`,
    `|---|--:|--:|--:|`,
    ...pairedSummary.map((entry) => `| ${entry.target} | ${entry.p25} | ${entry.p50} | ${entry.p75} |`),
    '',
    `| difference within a cycle | p25 ms | p50 ms | p75 ms |`,
    `|---|--:|--:|--:|`,
    `| embedded: limiter on − off | ${pairedAdded.embedded.p25} | **${pairedAdded.embedded.p50}** | ${pairedAdded.embedded.p75} |`,
    `| Redis-backed: limiter on − off | ${pairedAdded.redis.p25} | **${pairedAdded.redis.p50}** | ${pairedAdded.redis.p75} |`,
    `| noise floor: two "off" servers | ${pairedAdded.noiseFloor.p25} | ${pairedAdded.noiseFloor.p50} | ${pairedAdded.noiseFloor.p75} |`,
    '',
    `Paced at ${options.rate} req/s (latency from when each request was due), ${options.connections} connections, ${options.rounds} × ${options.durationSeconds} s per target (rotating order):`,
    '',
    `| target | 200s | problems | p50 ms | p90 ms | p99 ms |`,
    `|---|--:|--:|--:|--:|--:|`,
    ...underLoad.map((entry) => `| ${entry.target} | ${entry.responses} | ${entry.problems} | ${entry.p50} | ${entry.p90} | ${entry.p99} |`),
    '',
    `Redis (${commands.requests} requests decided by the Redis-backed limiter): ${commands.clientCommandsPerRequest} command(s) per request from the gateway; ` +
      `${commands.scriptInternalCallsPerRequest} calls inside the script (TIME, GET, SET); INFO commandstats: ${JSON.stringify(commands.calls)}`,
    '',
    `consume() alone: memory p50 ${microResults.memoryMicros.p50} µs (p99 ${microResults.memoryMicros.p99}); ` +
      `Redis p50 ${microResults.redisMicros.p50} µs (p99 ${microResults.redisMicros.p99}), one round trip to a local redis-server`,
  ];
  process.stdout.write(`\n${lines.join('\n')}\n`);
  if (options.write) {
    const dir = path.join(REPO_ROOT, 'bench', 'results');
    mkdirSync(dir, { recursive: true });
    const file = path.join(dir, `rate-limit-${report.date.slice(0, 10)}.json`);
    writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
    log(`results written to ${path.relative(REPO_ROOT, file)}`);
  }
}

let stopping = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (stopping) process.exit(130);
    stopping = true;
    log(`${signal}: cleaning up`);
    void cleanUp().finally(() => process.exit(130));
  });
}

main().then(
  async () => {
    await cleanUp();
    process.exit(0);
  },
  async (error: unknown) => {
    log(`failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    await cleanUp();
    process.exit(1);
  },
);
