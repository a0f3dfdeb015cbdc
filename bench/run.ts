/**
 * `npm run bench`: authenticated GET /api/missions/:id under autocannon against the embedded
 * wiring, the distributed wiring and a bare NestJS-on-Fastify baseline, in one run. See
 * bench/README.md for how to run it and read the results.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Cleanup } from './support/cleanup';
import { cpuBetween, cpuSnapshot, POSTGRES_SERVER } from './support/cpu';
import { runLoad, stopLoad } from './support/load';
import { BenchOptions, parseOptions, TargetName, USAGE, UsageError } from './support/options';
import { killAllServers, REPO_ROOT } from './support/processes';
import {
  BenchReport,
  compare,
  flagsOf,
  foreignCpu,
  gitInfo,
  machineInfo,
  markdownReport,
  markdownTable,
  NOISE_THRESHOLD_PERCENT,
  noiseWarnings,
  TargetResult,
} from './support/report';
import { PreparedTarget, startBaseline, startDistributed, startEmbedded, TargetContext } from './support/targets';

const log = (message: string): void => {
  process.stderr.write(`[bench] ${message}\n`);
};

const cleanup = new Cleanup(log);

/** Set on Ctrl-C: the run stops at the next step, the signal handler cleans up and exits. */
let interrupted = false;

class Interrupted extends Error {}

/** A target that did not come up: its message carries the servers' output, a stack would add nothing. */
class TargetStartError extends Error {}

function checkInterrupted(): void {
  if (interrupted) throw new Interrupted('interrupted');
}

/** The servers' extra environment: with --cpu-prof, the profiler preload and where it writes. */
function serverEnv(options: BenchOptions): Record<string, string> {
  if (options.cpuProfDir === undefined) return {};
  const dir = path.resolve(options.cpuProfDir || mkdtempSync(path.join(os.tmpdir(), 'mission-bench-profiles-')));
  mkdirSync(dir, { recursive: true });
  log(`CPU profiles of the servers go to ${dir} (written when each server exits)`);
  const preload = `--require ${JSON.stringify(path.join(__dirname, 'support', 'cpu-profile.cjs'))}`;
  return { NODE_OPTIONS: [process.env.NODE_OPTIONS, preload].filter(Boolean).join(' '), MISSION_BENCH_PROFILE_DIR: dir };
}

/**
 * The system PostgreSQL's own processes (WAL, checkpoints), Redis and a broker given by
 * KAFKA_BROKERS work for the distributed target too: not foreign work. Backends of other
 * databases are.
 */
function infrastructureOf(target: PreparedTarget): string[] {
  return target.name === 'distributed' ? [POSTGRES_SERVER, 'redis-server', ...(process.env.KAFKA_BROKERS ? ['java'] : [])] : [];
}

/** Waits (up to `maxSeconds`) until other work on the machine stays under the noise threshold for 3 s. */
async function waitQuiet(target: PreparedTarget, maxSeconds: number, cores: number): Promise<void> {
  const deadline = performance.now() + maxSeconds * 1000;
  for (let round = 0; ; round++) {
    const before = cpuSnapshot();
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    checkInterrupted();
    const { total, foreign } = foreignCpu(cpuBetween(before, cpuSnapshot(), target.servers, cores, target.databaseName), infrastructureOf(target));
    if (total < NOISE_THRESHOLD_PERCENT) {
      if (round > 0) log(`${target.name}: the machine is quiet now`);
      return;
    }
    const busy = foreign.slice(0, 3).map(([name, value]) => `${name} ${value}%`).join(', ');
    if (performance.now() > deadline) {
      log(`${target.name}: still busy after ${maxSeconds} s (${busy}); measuring anyway`);
      return;
    }
    if (round === 0) log(`${target.name}: other processes use ${Math.round(total)}% of a core (${busy}); waiting for quiet`);
  }
}

/** One warm-up and one measured run, with the CPU use of the measured part. */
async function measureOnce(target: PreparedTarget, options: BenchOptions, cores: number) {
  const settings = {
    origin: target.origin,
    requests: target.requests,
    connections: options.connections,
    pipelining: options.pipelining,
    rate: options.rate,
    timeoutSeconds: options.timeoutSeconds,
  };
  if (options.waitQuietSeconds > 0) await waitQuiet(target, options.waitQuietSeconds, cores);
  log(`${target.name}: warming up for ${options.warmupSeconds} s`);
  const warmup = await runLoad({ ...settings, durationSeconds: Math.max(1, Math.ceil(options.warmupSeconds)) });
  checkInterrupted();
  log(`${target.name}: warm-up ${warmup.requestsPerSecond.mean} req/s; measuring for ${options.durationSeconds} s`);
  const before = cpuSnapshot();
  const measured = await runLoad({ ...settings, durationSeconds: options.durationSeconds });
  const cpu = cpuBetween(before, cpuSnapshot(), target.servers, cores, target.databaseName);
  checkInterrupted();
  const flags = flagsOf(measured);
  if (warmup.non2xx + warmup.errors + warmup.mismatches > 0) {
    flags.push(`warm-up had ${warmup.non2xx} non-2xx, ${warmup.errors} errors, ${warmup.mismatches} mismatches`);
  }
  log(
    `${target.name}: ${measured.requestsPerSecond.mean} req/s, p50 ${measured.latencyMs.p50} ms, p99 ${measured.latencyMs.p99} ms` +
      (flags.length > 0 ? ` — FLAGGED: ${flags.join('; ')}` : ''),
  );
  if (cpu) {
    const named = (entries: Record<string, number>): string => Object.entries(entries).map(([key, value]) => `${key} ${value}%`).join(', ');
    log(`${target.name}: cpu client ${cpu.client}%, ${named(cpu.servers)}${Object.keys(cpu.others).length ? `, others: ${named(cpu.others)}` : ''}; machine ${cpu.machineBusy}% of ${cpu.machineCapacity}%`);
  }
  const warnings = noiseWarnings(cpu, infrastructureOf(target));
  for (const warning of warnings) log(`${target.name}: warning: ${warning}`);
  return { warmup, measured, cpu, flags, warnings, foreign: foreignCpu(cpu, infrastructureOf(target)).total };
}

/**
 * Attempts at a quiet measured run when --wait-quiet is on. The quietest is kept; of runs about
 * as quiet (within 5 points of a core), the later one, which had more warm-up.
 */
const QUIET_ATTEMPTS = 3;
const QUIET_TIE_PERCENT = 5;

async function measure(target: PreparedTarget, options: BenchOptions, cores: number): Promise<TargetResult> {
  log(`${target.name}: up after ${target.startupSeconds.toFixed(1)} s`);
  const attempts = options.waitQuietSeconds > 0 ? QUIET_ATTEMPTS : 1;
  let run = await measureOnce(target, options, cores);
  for (let attempt = 2; attempt <= attempts && run.warnings.length > 0; attempt++) {
    log(`${target.name}: the machine got busy during the run; measuring again (attempt ${attempt} of ${attempts})`);
    const again = await measureOnce(target, options, cores);
    if (again.foreign < run.foreign + QUIET_TIE_PERCENT) run = again;
  }
  const { warmup, measured, cpu, flags, warnings } = run;
  const { durationSeconds, responses, non2xx, errors, mismatches, requestsPerSecond } = warmup;
  return {
    name: target.name,
    description: target.description,
    origin: target.origin,
    paths: target.requests.map((request) => request.path),
    startupSeconds: Math.round(target.startupSeconds * 10) / 10,
    details: target.details,
    bodyBytes: Buffer.byteLength(target.requests[0]?.body ?? ''),
    responseBody: target.requests[0]?.body ?? '',
    warmup: { durationSeconds, responses, non2xx, errors, mismatches, requestsPerSecond },
    measured,
    cpu,
    uncleanExits: [],
    flags,
    warnings,
  };
}

async function main(): Promise<number> {
  let parsed: ReturnType<typeof parseOptions>;
  try {
    parsed = parseOptions(process.argv.slice(2));
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    process.stderr.write(`${error.message}\n\n${USAGE}\n`);
    return 2;
  }
  if (parsed === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const options = parsed;
  const startedAt = new Date();
  const machine = machineInfo();
  const context: TargetContext = { cleanup, log, tenants: options.tenants, serverEnv: serverEnv(options) };
  log(
    `${options.mode} run: ${options.targets.join(', ')}; ${options.warmupSeconds} s warm-up + ${options.durationSeconds} s measured, ` +
      `${options.connections} connections, pipelining ${options.pipelining}, ${options.tenants} tenant(s)${options.rate ? `, offered ${options.rate} req/s` : ''}; ${machine.cpus} cpus, node ${machine.node}`,
  );

  const results: TargetResult[] = [];
  let missionBody: string | undefined;
  for (const name of options.targets) {
    log(`${name}: starting`);
    let target: PreparedTarget;
    try {
      target = await start(name, context, missionBody);
    } catch (error) {
      checkInterrupted();
      throw new TargetStartError(`The ${name} target could not start: ${error instanceof Error ? error.message : String(error)}`);
    }
    if (name !== 'baseline') missionBody ??= target.requests[0]?.body;
    checkInterrupted();
    const result = await measure(target, options, machine.cpus);
    checkInterrupted();
    log(`${name}: stopping`);
    const unclean = await target.stop();
    results.push({ ...result, uncleanExits: unclean });
    if (unclean.length > 0) log(`${name}: not every process exited cleanly: ${unclean.join(', ')}`);
  }

  compare(results);
  const report: BenchReport = {
    schema: 1,
    date: startedAt.toISOString().slice(0, 10),
    startedAt: startedAt.toISOString(),
    finishedAt: new Date().toISOString(),
    git: gitInfo(),
    machine,
    parameters: {
      mode: options.mode,
      warmupSeconds: options.warmupSeconds,
      durationSeconds: options.durationSeconds,
      connections: options.connections,
      pipelining: options.pipelining,
      tenants: options.tenants,
      offeredRate: options.rate ?? null,
      timeoutSeconds: options.timeoutSeconds,
      request: 'GET /api/missions/:id',
      client: 'autocannon (in the benchmark process; servers in their own processes)',
      serverEnvironment: 'NODE_ENV=test, LOG_LEVEL=warn (as the test suites start them)',
      cpuProfile: options.cpuProfDir !== undefined,
      waitQuietSeconds: options.waitQuietSeconds,
    },
    targets: results,
    ok: results.every((result) => result.flags.length === 0),
  };

  const markdown = markdownReport(report);
  if (options.write) {
    const dir = path.join(REPO_ROOT, 'bench', 'results');
    mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, `${report.date}.json`), `${JSON.stringify(report, null, 2)}\n`);
    writeFileSync(path.join(dir, `${report.date}.md`), markdown);
    log(`results written to bench/results/${report.date}.json and .md`);
  } else {
    log('results not written (quick, profiling or partial run; --write forces it)');
  }
  process.stdout.write(`\n${markdownTable(results)}\n\n`);
  if (!report.ok) {
    log('FLAGGED: at least one run had non-2xx responses, errors or mismatched bodies (see above)');
    return 1;
  }
  return 0;
}

function start(name: TargetName, context: TargetContext, missionBody: string | undefined): Promise<PreparedTarget> {
  switch (name) {
    case 'embedded':
      return startEmbedded(context);
    case 'distributed':
      return startDistributed(context);
    case 'baseline':
      return startBaseline(context, missionBody);
  }
}

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (interrupted) {
      log('second signal: killing everything now');
      killAllServers();
      process.exit(130);
    }
    interrupted = true;
    log(`${signal}: stopping the load and cleaning up (again to force)`);
    stopLoad();
    void cleanup.runAll().finally(() => process.exit(130));
  });
}

main().then(
  async (code) => {
    if (interrupted) return; // the signal handler cleans up and exits
    await cleanup.runAll();
    process.exit(code);
  },
  async (error: unknown) => {
    if (interrupted) return;
    log(`FAILED: ${error instanceof TargetStartError ? error.message : error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    await cleanup.runAll();
    process.exit(1);
  },
);
