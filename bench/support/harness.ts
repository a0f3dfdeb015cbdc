import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Cleanup } from './cleanup';
import { cpuBetween, cpuSnapshot, type CpuReport, POSTGRES_SERVER } from './cpu';
import type { BenchOptions } from './options';
import { runLoad } from './load';
import { killAllServers, REPO_ROOT } from './processes';
import { type BrokerSettle, compilerCpuMs, settleCompilers } from './jit';
import { foreignCpu, NOISE_THRESHOLD_PERCENT } from './report';
import { KAFKA_BROKER, type PreparedTarget } from './targets';

/** Thrown at the next step after Ctrl-C: the signal handler cleans up and exits. */
export class Interrupted extends Error {}

/** A target that did not come up: its message carries the servers' output, a stack would add nothing. */
export class TargetStartError extends Error {}

/**
 * What the suites that start targets share: logging, the clean-up stack, Ctrl-C handling, the
 * servers' extra environment and waiting for a quiet machine.
 */
export class Harness {
  readonly cleanup: Cleanup;
  /** Set on Ctrl-C: the run stops at the next step. */
  interrupted = false;
  private readonly onInterrupt: Array<() => void> = [];

  constructor(private readonly prefix: string) {
    this.cleanup = new Cleanup(this.log);
  }

  readonly log = (message: string): void => {
    process.stderr.write(`[${this.prefix}] ${message}\n`);
  };

  checkInterrupted(): void {
    if (this.interrupted) throw new Interrupted('interrupted');
  }

  /** Called on the first Ctrl-C, before the clean-up (to stop a load in progress). */
  whenInterrupted(fn: () => void): void {
    this.onInterrupt.push(fn);
  }

  /** The servers' extra environment: with --cpu-prof and --alloc-prof, the profilers' preloads and where they write. */
  serverEnv(options: Pick<BenchOptions, 'cpuProfDir' | 'allocProfDir'>): Record<string, string> {
    const env: Record<string, string> = {};
    const preloads: string[] = [];
    const profile = (dirOption: string | undefined, what: string, preload: string, variable: string): void => {
      if (dirOption === undefined) return;
      const dir = path.resolve(dirOption || mkdtempSync(path.join(os.tmpdir(), 'mission-bench-profiles-')));
      mkdirSync(dir, { recursive: true });
      this.log(`${what} of the servers go to ${dir} (written when each server exits)`);
      preloads.push(`--require ${JSON.stringify(path.join(__dirname, preload))}`);
      env[variable] = dir;
    };
    profile(options.cpuProfDir, 'CPU profiles', 'cpu-profile.cjs', 'MISSION_BENCH_PROFILE_DIR');
    profile(options.allocProfDir, 'Allocation profiles', 'alloc-profile.cjs', 'MISSION_BENCH_ALLOC_PROFILE_DIR');
    if (preloads.length > 0) env.NODE_OPTIONS = [process.env.NODE_OPTIONS, ...preloads].filter(Boolean).join(' ');
    return env;
  }

  /** Waits (up to `maxSeconds`) until other work on the machine stays under the noise threshold for 3 s. */
  async waitQuiet(target: PreparedTarget, maxSeconds: number, cores: number): Promise<void> {
    const deadline = performance.now() + maxSeconds * 1000;
    for (let round = 0; ; round++) {
      const before = cpuSnapshot();
      await new Promise((resolve) => setTimeout(resolve, 3_000));
      this.checkInterrupted();
      const { total, foreign } = foreignCpu(cpuBetween(before, cpuSnapshot(), target.servers, cores, target.databaseName), infrastructureOf(target));
      if (total < NOISE_THRESHOLD_PERCENT) {
        if (round > 0) this.log(`${target.name}: the machine is quiet now`);
        return;
      }
      const busy = foreign
        .slice(0, 3)
        .map(([name, value]) => `${name} ${value}%`)
        .join(', ');
      if (performance.now() > deadline) {
        this.log(`${target.name}: still busy after ${maxSeconds} s (${busy}); measuring anyway`);
        return;
      }
      if (round === 0) this.log(`${target.name}: other processes use ${Math.round(total)}% of a core (${busy}); waiting for quiet`);
    }
  }

  /**
   * With a Kafka broker started for the run: load in slices until the broker's JIT compilers are
   * quiet, for at most `maxSeconds` (support/jit.ts says why). The load is the http suite's: the
   * target's mission read, closed loop at `connections`. It takes every path of the broker a
   * mission takes (produce with acks=all, fetch, offset commits) and writes nothing, so the
   * database a suite then measures is the one it prepared, not one grown, and being vacuumed,
   * by the warm-up. Then a pause of SETTLE_PAUSE_SECONDS, so that the CPU at rest sampled next does
   * not take in the load's tail (collections, the last fetches). Null for the other targets, a
   * broker given by KAFKA_BROKERS, or `maxSeconds` 0.
   */
  async settleBroker(target: PreparedTarget, maxSeconds: number, connections = SETTLE_CONNECTIONS): Promise<BrokerSettle | null> {
    const pid = target.servers[KAFKA_BROKER];
    if (pid === undefined || maxSeconds <= 0) return null;
    this.log(`${target.name}: mission reads at ${connections} connections until the broker's JIT compilers are quiet (at most ${maxSeconds} s)`);
    const load = async (seconds: number): Promise<void> => {
      const run = await runLoad({ origin: target.origin, requests: target.requests, connections, pipelining: 1, durationSeconds: seconds, timeoutSeconds: 10 });
      const problems = run.non2xx + run.errors + run.mismatches;
      if (problems > 0) this.log(`${target.name}: broker warm-up: ${problems} of ${run.responses} reads failed (${run.errorSamples.join('; ') || 'non-2xx'})`);
    };
    const settle = await settleCompilers({
      maxSeconds,
      compilerMs: () => compilerCpuMs(pid),
      load,
      log: this.log,
      label: target.name,
      checkInterrupted: () => this.checkInterrupted(),
    });
    await new Promise((resolve) => setTimeout(resolve, SETTLE_PAUSE_SECONDS * 1000));
    this.checkInterrupted();
    return settle;
  }

  /**
   * The servers' CPU use at rest (no load, after start-up and preparation) over `seconds`: what
   * they spend whatever the load (Kafka consumers' fetches, timers), which a low load's CPU per
   * request includes.
   */
  async idleCpu(target: PreparedTarget, cores: number, seconds = IDLE_SECONDS): Promise<CpuReport | null> {
    const before = cpuSnapshot();
    await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
    this.checkInterrupted();
    const cpu = cpuBetween(before, cpuSnapshot(), target.servers, cores, target.databaseName);
    if (cpu) this.log(`${target.name}: at rest: ${percentText(cpu.servers)}`);
    return cpu;
  }

  /**
   * Runs `main` and exits with its code after the clean-up; Ctrl-C (or SIGTERM) stops the run and
   * cleans up, a second one kills every server at once.
   */
  run(main: () => Promise<number>): void {
    for (const signal of ['SIGINT', 'SIGTERM'] as const) {
      process.on(signal, () => {
        if (this.interrupted) {
          this.log('second signal: killing everything now');
          killAllServers();
          process.exit(130);
        }
        this.interrupted = true;
        this.log(`${signal}: stopping the load and cleaning up (again to force)`);
        for (const fn of this.onInterrupt) fn();
        void this.cleanup.runAll().finally(() => process.exit(130));
      });
    }
    main().then(
      async (code) => {
        if (this.interrupted) return; // the signal handler cleans up and exits
        await this.cleanup.runAll();
        process.exit(code);
      },
      async (error: unknown) => {
        if (this.interrupted) return;
        this.log(`FAILED: ${error instanceof TargetStartError ? error.message : error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
        await this.cleanup.runAll();
        process.exit(1);
      },
    );
  }
}

/** Connections of the broker warm-up's read load (the load the http goals are read at). */
export const SETTLE_CONNECTIONS = 50;
/** Seconds without load between the broker warm-up and what comes next. */
export const SETTLE_PAUSE_SECONDS = 5;

/** Seconds of the at-rest CPU sample taken after a target is up. */
export const IDLE_SECONDS = 3;

/** `name 12.3%, other 4%` */
export function percentText(entries: Record<string, number>): string {
  return (
    Object.entries(entries)
      .map(([name, value]) => `${name} ${value}%`)
      .join(', ') || '–'
  );
}

/**
 * The system PostgreSQL's own processes (WAL, checkpoints), Redis and a broker given by
 * KAFKA_BROKERS work for the distributed target too: not foreign work. Backends of other
 * databases are.
 */
export function infrastructureOf(target: Pick<PreparedTarget, 'name'>): string[] {
  const brokerGiven = process.env.KAFKA_BROKERS ? ['java'] : [];
  if (target.name === 'distributed') return [POSTGRES_SERVER, 'redis-server', ...brokerGiven];
  return target.name === 'kafka-floor' ? brokerGiven : [];
}

/**
 * Attempts at a quiet measured run when --wait-quiet is on. The quietest is kept; of runs about
 * as quiet (within 5 points of a core), the later one, which had more warm-up.
 */
export const QUIET_ATTEMPTS = 3;
export const QUIET_TIE_PERCENT = 5;

/** Runs `measureOnce` up to QUIET_ATTEMPTS times while it reports warnings (with --wait-quiet), keeping the quietest run. */
export async function quietestOf<T extends { readonly warnings: readonly string[]; readonly foreign: number }>(
  harness: Harness,
  label: string,
  waitQuietSeconds: number,
  measureOnce: () => Promise<T>,
): Promise<T> {
  const attempts = waitQuietSeconds > 0 ? QUIET_ATTEMPTS : 1;
  let run = await measureOnce();
  for (let attempt = 2; attempt <= attempts && run.warnings.length > 0; attempt++) {
    harness.log(`${label}: the machine got busy during the run; measuring again (attempt ${attempt} of ${attempts})`);
    const again = await measureOnce();
    if (again.foreign < run.foreign + QUIET_TIE_PERCENT) run = again;
  }
  return run;
}

/**
 * The first of `<name>`, `<name>-2`, `<name>-3`, … with neither a .json nor a .md in `dir`: a
 * second run on the same day keeps the first one's files (which may be committed) instead of
 * overwriting them.
 */
export function freeResultName(dir: string, name: string): string {
  for (let attempt = 1; ; attempt++) {
    const candidate = attempt === 1 ? name : `${name}-${attempt}`;
    if (!existsSync(path.join(dir, `${candidate}.json`)) && !existsSync(path.join(dir, `${candidate}.md`))) return candidate;
  }
}

/**
 * Writes a suite's report as `bench/results/<name>.json` and `.md` (or `<name>-2`, … when those
 * exist) when asked (and says so), or says why not; then prints `tables`. Returns the exit code:
 * 1 when the run was flagged.
 */
export function finishReport(
  options: { readonly write: boolean },
  name: string,
  report: { readonly ok: boolean },
  markdown: string,
  tables: string,
  flagged: string,
  log: (message: string) => void,
): number {
  if (options.write) {
    const dir = path.join(REPO_ROOT, 'bench', 'results');
    mkdirSync(dir, { recursive: true });
    const free = freeResultName(dir, name);
    writeFileSync(path.join(dir, `${free}.json`), `${JSON.stringify(report, null, 2)}\n`);
    writeFileSync(path.join(dir, `${free}.md`), markdown);
    log(`results written to bench/results/${free}.json and .md`);
  } else {
    log('results not written (quick, profiling or partial run; --write forces it)');
  }
  process.stdout.write(`\n${tables}\n\n`);
  if (report.ok) return 0;
  log(`FLAGGED: ${flagged}`);
  return 1;
}
