import { execFileSync } from 'node:child_process';
import os from 'node:os';
import { CpuReport, KERNEL_THREADS } from './cpu';
import { REPO_ROOT } from './processes';
import type { LoadResult } from './load';
import type { BenchOptions, TargetName } from './options';

/** The performance goals for later work (bench/README.md). Reported against, never enforced. */
export const GOALS: Partial<Record<TargetName, { readonly minRequestsPerSecond: number; readonly maxP50Ms?: number; readonly maxP99Ms: number }>> = {
  embedded: { minRequestsPerSecond: 10_000, maxP99Ms: 10 },
  distributed: { minRequestsPerSecond: 3_000, maxP50Ms: 3, maxP99Ms: 15 },
};

export interface TargetResult {
  readonly name: TargetName;
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
  readonly measured: LoadResult;
  readonly cpu: CpuReport | null;
  /** Processes that did not exit cleanly when the target was stopped. */
  readonly uncleanExits: string[];
  /** Problems that make the numbers suspect: non-2xx, errors, timeouts, mismatched bodies. */
  readonly flags: string[];
  /** Conditions that may have skewed the numbers (other work on the machine). */
  readonly warnings: string[];
  /** Target ÷ baseline of the same run: req/s (higher is better) and p50 (lower is better). */
  ratioToBaseline?: { readonly requestsPerSecond: number; readonly p50: number };
  goal?: { readonly description: string; readonly met: boolean };
}

export interface BenchReport {
  readonly schema: 1;
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
    readonly durationSeconds: number;
    readonly connections: number;
    readonly pipelining: number;
    readonly tenants: number;
    /** Offered req/s (null: saturation, each connection sends as soon as it has its answer). */
    readonly offeredRate: number | null;
    readonly timeoutSeconds: number;
    readonly request: string;
    readonly client: string;
    readonly serverEnvironment: string;
    readonly cpuProfile: boolean;
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
  const changes = status === 'unknown' ? [] : status.split('\n').filter(Boolean).map((line) => line.trim());
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
  if (measured.errors > 0) flags.push(`${measured.errors} errors, ${measured.timeouts} of them timeouts${measured.errorSamples.length ? `: ${measured.errorSamples.join('; ')}` : ''}`);
  if (measured.mismatches > 0) flags.push(`${measured.mismatches} responses with another body than the mission`);
  if (measured.ok === 0) flags.push('no successful response');
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

/** Ratios against the baseline and the goal verdicts, in place. */
export function compare(results: TargetResult[]): void {
  const baseline = results.find((result) => result.name === 'baseline');
  for (const result of results) {
    if (baseline && result !== baseline && baseline.measured.requestsPerSecond.mean > 0) {
      result.ratioToBaseline = {
        requestsPerSecond: significant(result.measured.requestsPerSecond.mean / baseline.measured.requestsPerSecond.mean),
        p50: significant(result.measured.latencyMs.p50 / baseline.measured.latencyMs.p50),
      };
    }
    const goal = GOALS[result.name];
    if (goal) {
      const { requestsPerSecond, latencyMs } = { requestsPerSecond: result.measured.requestsPerSecond.mean, latencyMs: result.measured.latencyMs };
      const met =
        result.flags.length === 0 &&
        requestsPerSecond >= goal.minRequestsPerSecond &&
        latencyMs.p99 <= goal.maxP99Ms &&
        (goal.maxP50Ms === undefined || latencyMs.p50 <= goal.maxP50Ms);
      const parts = [`≥ ${goal.minRequestsPerSecond.toLocaleString('en-US')} req/s`];
      if (goal.maxP50Ms !== undefined) parts.push(`p50 ≤ ${goal.maxP50Ms} ms`);
      parts.push(`p99 ≤ ${goal.maxP99Ms} ms`);
      result.goal = { description: parts.join(', '), met };
    }
  }
}

const integer = (value: number): string => (Number.isFinite(value) ? Math.round(value).toLocaleString('en-US') : '–');
const ms = (value: number): string => (Number.isFinite(value) ? value.toFixed(2) : '–');

export function markdownTable(results: readonly TargetResult[]): string {
  const rows = [
    '| target | req/s mean | req/s median | p50 ms | p90 ms | p99 ms | max ms | req/s ÷ baseline | p50 ÷ baseline | non-2xx / errors | goal |',
    '|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|',
  ];
  for (const result of results) {
    const { measured } = result;
    const ratio = result.ratioToBaseline;
    const problems = measured.non2xx + measured.errors + measured.mismatches;
    rows.push(
      [
        '',
        result.flags.length > 0 ? `${result.name} ⚠` : result.name,
        integer(measured.requestsPerSecond.mean),
        integer(measured.requestsPerSecond.median),
        ms(measured.latencyMs.p50),
        ms(measured.latencyMs.p90),
        ms(measured.latencyMs.p99),
        ms(measured.latencyMs.max),
        ratio ? ratioText(ratio.requestsPerSecond) : result.name === 'baseline' ? '1.00×' : '–',
        ratio ? ratioText(ratio.p50) : result.name === 'baseline' ? '1.00×' : '–',
        problems === 0 ? '0' : `**${measured.non2xx} / ${measured.errors + measured.mismatches}**`,
        result.goal ? `${result.goal.met ? 'met' : 'not met'} (${result.goal.description})` : '–',
        '',
      ].join(' | ').trim(),
    );
  }
  return rows.join('\n');
}

function cpuTable(results: readonly TargetResult[]): string {
  const rows = ['| target | client | servers | others | machine busy |', '|---|--:|---|---|--:|'];
  for (const result of results) {
    if (!result.cpu) continue;
    const named = (entries: Record<string, number>): string =>
      Object.entries(entries)
        .map(([name, value]) => `${name} ${value}%`)
        .join(', ') || '–';
    rows.push(`| ${result.name} | ${result.cpu.client}% | ${named(result.cpu.servers)} | ${named(result.cpu.others)} | ${result.cpu.machineBusy}% of ${result.cpu.machineCapacity}% |`);
  }
  return rows.length > 2 ? rows.join('\n') : '';
}

export function markdownReport(report: BenchReport): string {
  const { machine, parameters, git: commit } = report;
  const lines = [
    `# HTTP benchmark ${report.date}`,
    '',
    `\`${parameters.request}\` (${parameters.tenants === 1 ? 'one tenant' : `${parameters.tenants} tenants in turn`}), ${parameters.connections} connections, pipelining ${parameters.pipelining}, ` +
      `${parameters.offeredRate ? `offered ${parameters.offeredRate} req/s` : 'closed loop (saturation)'}, ` +
      `${parameters.warmupSeconds} s warm-up then ${parameters.durationSeconds} s measured per target (${parameters.mode} mode${parameters.cpuProfile ? ', servers under --cpu-prof' : ''}).`,
    `Commit \`${commit.commit.slice(0, 12)}\` (${commit.branch}${commit.dirty ? `, plus ${commit.changes.length} uncommitted change(s) outside bench/` : ''}), ` +
      `${machine.cpus} × ${machine.cpuModel}, ${machine.memoryGiB} GiB, Node ${machine.node}, ${machine.platform} ${machine.release}, started ${report.startedAt}.`,
    '',
    markdownTable(report.targets),
    '',
    'req/s: 2xx responses per full second of the measured run (mean and median of the per-second samples). ' +
      'Latency: every 2xx response, exact percentiles. Ratios are against the baseline of the same run.',
  ];
  const flagged = report.targets.filter((result) => result.flags.length > 0);
  if (flagged.length > 0) {
    lines.push('', '**Flagged runs (numbers not trustworthy):**', '');
    for (const result of flagged) lines.push(`- ${result.name}: ${result.flags.join('; ')}`);
  }
  const noisy = report.targets.filter((result) => result.warnings.length > 0);
  if (noisy.length > 0) {
    lines.push('', 'Warnings (the machine was not quiet):', '');
    for (const result of noisy) lines.push(`- ${result.name}: ${result.warnings.join('; ')}`);
  }
  const cpu = cpuTable(report.targets);
  if (cpu) {
    lines.push('', 'CPU during the measured run (100% = one core; the client is autocannon in the benchmark process):', '', cpu);
  }
  return `${lines.join('\n')}\n`;
}
