import type { ProcessPauses, StageResult } from './stages';
import { execFileSync } from 'node:child_process';
import os from 'node:os';
import { CpuReport, KERNEL_THREADS } from './cpu';
import { KAFKA_BROKER } from './targets';
import { REPO_ROOT } from './processes';
import type { BrokerSettle } from './jit';
import type { LoadResult } from './load';
import type { BenchOptions, TargetName } from './options';

/**
 * One goal of the performance issues for a target, read at one connection count: throughput and
 * p99 under load (50 connections), p50 one request at a time (1 connection).
 */
export interface ReadGoal {
  readonly connections: number;
  readonly minRequestsPerSecond?: number;
  /**
   * The same throughput as a ratio to the baseline of the run, for a machine slower or faster
   * than the one the goal was set on; the throughput is met when either holds.
   */
  readonly minRatioToBaseline?: number;
  readonly maxP50Ms?: number;
  readonly maxP99Ms?: number;
}

/** The performance goals (bench/README.md), as the issues state them. Reported against, never enforced. */
export const GOALS: Partial<Record<TargetName, readonly ReadGoal[]>> = {
  // "≥ 10,000 req/s at 50 connections (≥ 0.18× baseline), p99 ≤ 10 ms; p50 ≤ 0.5 ms at 1 connection"
  embedded: [
    { connections: 50, minRequestsPerSecond: 10_000, minRatioToBaseline: 0.18, maxP99Ms: 10 },
    { connections: 1, maxP50Ms: 0.5 },
  ],
  // "≥ 3,000 req/s at 50 connections with p99 ≤ 15 ms, and p50 ≤ 3 ms at 1 connection"
  distributed: [
    { connections: 50, minRequestsPerSecond: 3_000, maxP99Ms: 15 },
    { connections: 1, maxP50Ms: 3 },
  ],
};

/** The goal's verdict on a result (its ratio to the baseline worked out already, if there was one). */
export function judge(goal: ReadGoal, result: Pick<TargetResult, 'flags' | 'measured' | 'ratioToBaseline'>): { description: string; met: boolean } {
  const { requestsPerSecond, latencyMs } = result.measured;
  const parts: string[] = [];
  let met = result.flags.length === 0;
  const paced = result.measured.pacing;
  if (goal.minRequestsPerSecond !== undefined) {
    // Paced, the baseline runs at the same offered rate: the ratio says nothing, the absolute rate does.
    const ratio = paced ? undefined : goal.minRatioToBaseline;
    parts.push(`≥ ${goal.minRequestsPerSecond.toLocaleString('en-US')} req/s${ratio === undefined ? '' : ` or ≥ ${ratio}× the baseline`}`);
    const enough = requestsPerSecond.mean >= goal.minRequestsPerSecond || (ratio !== undefined && (result.ratioToBaseline?.requestsPerSecond ?? 0) >= ratio);
    met &&= enough;
  }
  if (goal.maxP50Ms !== undefined) {
    parts.push(`p50 ≤ ${goal.maxP50Ms} ms`);
    met &&= latencyMs.p50 <= goal.maxP50Ms;
  }
  if (goal.maxP99Ms !== undefined) {
    parts.push(`p99 ≤ ${goal.maxP99Ms} ms`);
    met &&= latencyMs.p99 <= goal.maxP99Ms;
  }
  const offered = paced ? `at ${paced.offeredPerSecond.toLocaleString('en-US')} req/s offered: ` : '';
  return { description: offered + parts.join(', '), met };
}

export interface TargetResult {
  readonly name: TargetName;
  /** Concurrent connections of this run (each target is measured once per count). */
  readonly connections: number;
  readonly description: string;
  readonly origin: string;
  /** The paths under load (one per tenant; the baseline answers any id). */
  readonly paths: string[];
  readonly startupSeconds: number;
  readonly details: Record<string, unknown>;
  readonly bodyBytes: number;
  /** The body of the (first) request under load, as every response must carry it. */
  readonly responseBody: string;
  readonly warmup: Pick<LoadResult, 'durationSeconds' | 'responses' | 'non2xx' | 'errors' | 'mismatches' | 'requestsPerSecond'>;
  /** The extra warm-up until the broker's JIT compilers were quiet, once per target (null: none). */
  readonly brokerSettle?: BrokerSettle | null;
  readonly measured: LoadResult;
  readonly cpu: CpuReport | null;
  /** The servers' CPU at rest, sampled once after the target came up (the same for each connection count). */
  readonly idleCpu: CpuReport | null;
  /** CPU milliseconds per 2xx response of each server process (the Kafka broker among them when started for the run). */
  readonly cpuMsPerRequest: Record<string, number> | null;
  /** Resident memory (MiB) of each server process itself at the end of the measured run. */
  readonly rssMiB: Record<string, number> | null;
  /** Where a read's time went during the measured run, stage by stage, from the servers' own histograms (support/stages.ts); targets that serve none have none. */
  readonly stages?: readonly StageResult[];
  /** Over the same run, each of those servers' event-loop delay and garbage collections. */
  readonly pauses?: readonly ProcessPauses[];
  /** Processes that did not exit cleanly when the target was stopped. */
  readonly uncleanExits: string[];
  /** Problems that make the numbers suspect: non-2xx, errors, timeouts, mismatched bodies. */
  readonly flags: string[];
  /** Conditions that may have skewed the numbers (other work on the machine). */
  readonly warnings: string[];
  /** Target ÷ baseline of the same run and connection count: req/s (higher is better) and p50 (lower is better). */
  ratioToBaseline?: { readonly requestsPerSecond: number; readonly p50: number };
  goal?: { readonly description: string; readonly met: boolean };
}

export interface BenchReport {
  /** 2: a result per target and connection count, with CPU per request. */
  readonly schema: 2;
  readonly date: string;
  readonly startedAt: string;
  readonly finishedAt: string;
  /** `changes`: uncommitted changes outside bench/ (what was measured is not exactly `commit`). */
  readonly git: { readonly commit: string; readonly branch: string; readonly dirty: boolean; readonly changes: string[] };
  readonly machine: {
    readonly cpus: number;
    readonly cpuModel: string;
    readonly memoryGiB: number;
    readonly node: string;
    readonly platform: string;
    readonly release: string;
    readonly arch: string;
    readonly loadAverageAtStart: number[];
  };
  readonly parameters: {
    readonly mode: BenchOptions['mode'];
    readonly warmupSeconds: number;
    /** Most seconds of warm-up load spent waiting for a fresh broker's JIT compilers (0: no wait). */
    readonly settleSeconds?: number;
    readonly durationSeconds: number;
    readonly connections: readonly number[];
    readonly pipelining: number;
    readonly tenants: number;
    /** Offered req/s (null: saturation, each connection sends as soon as it has its answer). */
    readonly offeredRate: number | null;
    readonly timeoutSeconds: number;
    readonly request: string;
    readonly client: string;
    readonly serverEnvironment: string;
    readonly cpuProfile: boolean;
    readonly allocProfile?: boolean;
    /** Longest wait for a quiet machine before each target (0: no wait). */
    readonly waitQuietSeconds: number;
  };
  readonly targets: TargetResult[];
  readonly ok: boolean;
}

function git(args: string[]): string {
  try {
    return execFileSync('git', args, {
      cwd: REPO_ROOT,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
      // Read-only: no index refresh in a tree others work in.
      env: { ...process.env, GIT_OPTIONAL_LOCKS: '0' },
    }).trimEnd();
  } catch {
    return 'unknown';
  }
}

export function gitInfo(): BenchReport['git'] {
  const status = git(['status', '--porcelain', '--', '.', ':(exclude)bench']);
  const changes =
    status === 'unknown'
      ? []
      : status
          .split('\n')
          .filter(Boolean)
          .map((line) => line.trim());
  return {
    commit: git(['rev-parse', 'HEAD']),
    branch: git(['rev-parse', '--abbrev-ref', 'HEAD']),
    dirty: changes.length > 0,
    changes: changes.slice(0, 50),
  };
}

export function machineInfo(): BenchReport['machine'] {
  const cpus = os.cpus();
  return {
    cpus: cpus.length,
    cpuModel: cpus[0]?.model.trim() ?? 'unknown',
    memoryGiB: Math.round((os.totalmem() / 1024 ** 3) * 10) / 10,
    node: process.version,
    platform: os.platform(),
    release: os.release(),
    arch: os.arch(),
    loadAverageAtStart: os.loadavg().map((value) => Math.round(value * 100) / 100),
  };
}

export function flagsOf(measured: LoadResult): string[] {
  const flags: string[] = [];
  if (measured.non2xx > 0) flags.push(`${measured.non2xx} non-2xx responses (${JSON.stringify(measured.statusCodes)})`);
  if (measured.errors > 0)
    flags.push(`${measured.errors} errors, ${measured.timeouts} of them timeouts${measured.errorSamples.length ? `: ${measured.errorSamples.join('; ')}` : ''}`);
  if (measured.mismatches > 0) flags.push(`${measured.mismatches} responses with another body than the mission`);
  if (measured.ok === 0) flags.push('no successful response');
  if (measured.pacing && measured.pacing.unsent > 0) flags.push(`did not keep up with the offered rate: ${measured.pacing.unsent} requests due were never sent`);
  return flags;
}

/**
 * Other processes busy during a measured run compete with client and servers for the cores.
 * The target's own infrastructure (`infrastructure`: names in `others`) and kernel threads are
 * part of what is measured, not noise.
 */
export function noiseWarnings(cpu: CpuReport | null, infrastructure: readonly string[]): string[] {
  const { total, foreign } = foreignCpu(cpu, infrastructure);
  if (total < NOISE_THRESHOLD_PERCENT) return [];
  const top = foreign
    .slice(0, 4)
    .map(([name, value]) => `${name} ${value}%`)
    .join(', ');
  return [`other processes used ${Math.round(total)}% of a core during the run (${top})`];
}

/** CPU (percent of one core) of processes that are neither ours, the target's infrastructure nor kernel threads. */
export function foreignCpu(cpu: CpuReport | null, infrastructure: readonly string[]): { total: number; foreign: Array<[string, number]> } {
  if (!cpu) return { total: 0, foreign: [] };
  const foreign = Object.entries(cpu.others).filter(([name]) => name !== KERNEL_THREADS && !infrastructure.includes(name));
  return { total: foreign.reduce((sum, [, value]) => sum + value, 0), foreign };
}

/** Percent of one core used by processes outside the benchmark above which a run is marked noisy. */
export const NOISE_THRESHOLD_PERCENT = 25;

/** Three significant digits: ratios far below 1 keep their information. */
function significant(value: number): number {
  return Number.isFinite(value) ? Number(value.toPrecision(3)) : NaN;
}

/** A ratio for the table: two significant digits below 0.1, whole numbers from 10, two decimals between. */
function ratioText(value: number): string {
  return `${value < 0.1 ? value.toPrecision(2) : value >= 10 ? value.toFixed(0) : value.toFixed(2)}×`;
}

/** Ratios against the baseline at the same connection count and the goal verdicts, in place. */
export function compare(results: TargetResult[]): void {
  for (const result of results) {
    const baseline = results.find((other) => other.name === 'baseline' && other.connections === result.connections);
    if (baseline && result !== baseline && baseline.measured.requestsPerSecond.mean > 0) {
      result.ratioToBaseline = {
        requestsPerSecond: significant(result.measured.requestsPerSecond.mean / baseline.measured.requestsPerSecond.mean),
        p50: significant(result.measured.latencyMs.p50 / baseline.measured.latencyMs.p50),
      };
    }
    const goal = GOALS[result.name]?.find((candidate) => candidate.connections === result.connections);
    if (goal) result.goal = judge(goal, result);
  }
}

const integer = (value: number): string => (Number.isFinite(value) ? Math.round(value).toLocaleString('en-US') : '–');
const ms = (value: number): string => (Number.isFinite(value) ? value.toFixed(2) : '–');

/** CPU milliseconds for the tables: three significant digits, '–' when not measured. */
export function cpuMsText(value: number | undefined): string {
  return value === undefined || !Number.isFinite(value) ? '–' : value >= 100 ? value.toFixed(0) : value.toPrecision(value >= 1 ? 3 : 2);
}

/** The Kafka broker's CPU milliseconds per unit of work (started for the run; '–' otherwise or embedded). */
export function brokerMs(perUnit: Record<string, number> | null): number | undefined {
  return perUnit?.[KAFKA_BROKER];
}

/** All the target's processes together (servers, their children, a broker started for the run, the benchmark database's backends). */
export function totalMs(perUnit: Record<string, number> | null): number | undefined {
  if (!perUnit) return undefined;
  return Number(
    Object.values(perUnit)
      .reduce((sum, value) => sum + value, 0)
      .toPrecision(3),
  );
}

/** `name 1.2, other 0.34` for a table cell. */
export function perUnitText(perUnit: Record<string, number> | null): string {
  if (!perUnit) return '–';
  return (
    Object.entries(perUnit)
      .map(([name, value]) => `${name} ${cpuMsText(value)}`)
      .join(', ') || '–'
  );
}

/** Rows in reading order: target by target (in the order run), fewer connections first. */
function byTarget(results: readonly TargetResult[]): TargetResult[] {
  const order = [...new Set(results.map((result) => result.name))];
  return [...results].sort((a, b) => order.indexOf(a.name) - order.indexOf(b.name) || a.connections - b.connections);
}

/** The largest resident set among a target's server processes (the Kafka broker's JVM apart), with its name. */
function largestText(resident: Record<string, number> | null): string {
  const largest = Object.entries(resident ?? {})
    .filter(([name]) => name !== KAFKA_BROKER)
    .sort((a, b) => b[1] - a[1])[0];
  return largest ? `${largest[1]} (${largest[0]})` : '–';
}

export function markdownTable(results: readonly TargetResult[]): string {
  const rows = [
    '| target | conns | req/s mean | req/s median | p50 ms | p90 ms | p99 ms | max ms | req/s ÷ baseline | p50 ÷ baseline | broker CPU ms/req | all servers CPU ms/req | largest server RSS MiB | non-2xx / errors | goal |',
    '|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|',
  ];
  for (const result of byTarget(results)) {
    const { measured } = result;
    const ratio = result.ratioToBaseline;
    const problems = measured.non2xx + measured.errors + measured.mismatches;
    rows.push(
      [
        '',
        result.flags.length > 0 ? `${result.name} ⚠` : result.name,
        measured.pacing ? `${result.connections} at ${integer(measured.pacing.offeredPerSecond)}/s` : String(result.connections),
        integer(measured.requestsPerSecond.mean),
        integer(measured.requestsPerSecond.median),
        ms(measured.latencyMs.p50),
        ms(measured.latencyMs.p90),
        ms(measured.latencyMs.p99),
        ms(measured.latencyMs.max),
        ratio ? ratioText(ratio.requestsPerSecond) : result.name === 'baseline' ? '1.00×' : '–',
        ratio ? ratioText(ratio.p50) : result.name === 'baseline' ? '1.00×' : '–',
        cpuMsText(brokerMs(result.cpuMsPerRequest)),
        cpuMsText(totalMs(result.cpuMsPerRequest)),
        largestText(result.rssMiB),
        problems === 0 ? '0' : `**${measured.non2xx} / ${measured.errors + measured.mismatches}**`,
        result.goal ? `${result.goal.met ? 'met' : 'not met'} (${result.goal.description})` : '–',
        '',
      ]
        .join(' | ')
        .trim(),
    );
  }
  return rows.join('\n');
}

/** Who used the cores: one row per run, `label` names it (target and connections, say). */
export function cpuUseTable(rows: ReadonlyArray<{ readonly label: string; readonly cpu: CpuReport | null }>, clientColumn = 'client'): string {
  const lines = [`| run | ${clientColumn} | servers | others | machine busy |`, '|---|--:|---|---|--:|'];
  const named = (entries: Record<string, number>): string =>
    Object.entries(entries)
      .map(([name, value]) => `${name} ${value}%`)
      .join(', ') || '–';
  for (const { label, cpu } of rows) {
    if (!cpu) continue;
    lines.push(`| ${label} | ${cpu.client}% | ${named(cpu.servers)} | ${named(cpu.others)} | ${cpu.machineBusy}% of ${cpu.machineCapacity}% |`);
  }
  return lines.length > 2 ? lines.join('\n') : '';
}

function cpuTable(results: readonly TargetResult[]): string {
  return cpuUseTable(byTarget(results).map((result) => ({ label: `${result.name}, ${result.connections} conn.`, cpu: result.cpu })));
}

function cpuPerRequestTable(results: readonly TargetResult[]): string {
  const rows = ['| run | CPU ms per 2xx response, by process |', '|---|---|'];
  for (const result of byTarget(results)) {
    if (result.cpuMsPerRequest) rows.push(`| ${result.name}, ${result.connections} conn. | ${perUnitText(result.cpuMsPerRequest)} |`);
  }
  return rows.length > 2 ? rows.join('\n') : '';
}

/**
 * What the warm-up did for the broker's JIT compilers, once per target that had a broker started
 * for the run; with `settleSeconds` 0, that there was none; otherwise empty when no target had one.
 */
export function settleText(results: ReadonlyArray<{ readonly name: string; readonly brokerSettle?: BrokerSettle | null }>, settleSeconds?: number): string {
  if (settleSeconds === 0) {
    return results.some((result) => result.name === 'distributed')
      ? 'No broker warm-up (`--settle=0`): a broker started for the run, if any, was measured after the `--warmup` load only, its JIT compilers possibly still busy.'
      : '';
  }
  const seen = new Set<string>();
  const parts: string[] = [];
  for (const { name, brokerSettle } of results) {
    if (!brokerSettle || seen.has(name)) continue;
    seen.add(name);
    const slices = brokerSettle.compilerPercent.length > 0 ? `; per 5 s: ${brokerSettle.compilerPercent.join(', ')}%` : '';
    parts.push(
      brokerSettle.settled
        ? `${name}: ${brokerSettle.seconds} s (its compilers at ${brokerSettle.windowPercent}% of a core over the last 15 s${slices})`
        : `${name}: ${brokerSettle.seconds} s, and its compilers still used ${Number.isFinite(brokerSettle.windowPercent) ? `${brokerSettle.windowPercent}%` : 'an unknown share'} of a core (measured anyway${slices})`,
    );
  }
  if (parts.length === 0) return '';
  return (
    `Broker warm-up: the Kafka broker started for the run is a fresh JVM whose JIT compilers take much of a core for its first minutes under load; ` +
    `before the first measured run, mission reads went on until they used less than 5% of a core over 15 s, then 5 s without load: ${parts.join('; ')}.`
  );
}

export function markdownReport(report: BenchReport): string {
  const { machine, parameters, git: commit } = report;
  const lines = [
    `# HTTP benchmark ${report.date}`,
    '',
    `\`${parameters.request}\` (${parameters.tenants === 1 ? 'one tenant' : `${parameters.tenants} tenants in turn`}), ${parameters.connections.join(' and ')} connections, pipelining ${parameters.pipelining}, ` +
      `${parameters.offeredRate ? `offered ${parameters.offeredRate} req/s` : 'closed loop (saturation)'}, ` +
      `${parameters.warmupSeconds} s warm-up then ${parameters.durationSeconds} s measured per target and connection count (${parameters.mode} mode${parameters.cpuProfile ? ', servers under --cpu-prof' : ''}${parameters.allocProfile ? ', servers under --alloc-prof' : ''}).`,
    `Commit \`${commit.commit.slice(0, 12)}\` (${commit.branch}${commit.dirty ? `, plus ${commit.changes.length} uncommitted change(s) outside bench/` : ''}), ` +
      `${machine.cpus} × ${machine.cpuModel}, ${machine.memoryGiB} GiB, Node ${machine.node}, ${machine.platform} ${machine.release}, started ${report.startedAt}.`,
    '',
    markdownTable(report.targets),
    '',
    'req/s: 2xx responses per full second of the measured run (mean and median of the per-second samples). ' +
      'Latency: every 2xx response, exact percentiles. Ratios are against the baseline of the same run at the same connection count. ' +
      `CPU ms/req: CPU time of the broker (the Kafka broker started for the run) and of all the target's processes over the measured run, divided by its 2xx responses. Goals: throughput and p99 at 50 connections, p50 at 1 connection, as the performance issues state them.`,
  ];
  const settle = settleText(report.targets, parameters.settleSeconds);
  if (settle) lines.push('', settle);
  const flagged = report.targets.filter((result) => result.flags.length > 0);
  if (flagged.length > 0) {
    lines.push('', '**Flagged runs (numbers not trustworthy):**', '');
    for (const result of flagged) lines.push(`- ${result.name}, ${result.connections} conn.: ${result.flags.join('; ')}`);
  }
  const noisy = report.targets.filter((result) => result.warnings.length > 0);
  if (noisy.length > 0) {
    lines.push('', 'Warnings (the machine was not quiet):', '');
    for (const result of noisy) lines.push(`- ${result.name}, ${result.connections} conn.: ${result.warnings.join('; ')}`);
  }
  const cpu = cpuTable(report.targets);
  if (cpu) {
    lines.push('', 'CPU during the measured run (100% = one core; the client is autocannon in the benchmark process):', '', cpu);
  }
  const idle = cpuUseTable(
    report.targets.filter((result, index, all) => all.findIndex((other) => other.name === result.name) === index).map((result) => ({ label: result.name, cpu: result.idleCpu })),
  );
  if (idle)
    lines.push(
      '',
      'CPU at rest (a few seconds without load once the target was up, and for a target with a broker after the broker warm-up; part of every CPU-per-request figure, most visibly at one connection):',
      '',
      idle,
    );
  const perRequest = cpuPerRequestTable(report.targets);
  if (perRequest) lines.push('', 'CPU per request (milliseconds of CPU time over the measured run ÷ 2xx responses):', '', perRequest);
  return `${lines.join('\n')}\n`;
}
