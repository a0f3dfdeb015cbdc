import { readdirSync, readFileSync } from 'node:fs';
import { ticksPerSecond } from './cpu';

/**
 * A Kafka broker started for a run is a fresh JVM: for its first minute or two under load its
 * just-in-time compilers (threads `C1 CompilerThread…`, `C2 CompilerThread…`) take a large share
 * of a core, more than its request handling. A broker in service has long compiled its hot paths,
 * so a run measured while they still compile reports the broker's start-up, not what a client of a
 * deployment meets. The suites therefore read the prepared mission through the API until the
 * compilers are quiet (Harness.settleBroker) before they measure anything.
 */

/** Slices of warm-up load between two looks at the compilers. */
export const SETTLE_SLICE_SECONDS = 5;
/** The compilers count as quiet below this share of one core over QUIET_SLICES slices together. */
export const JIT_QUIET_PERCENT = 5;
/** A single quiet slice is not enough: a fresh broker's compilers pause for 5-10 s between bursts. */
export const QUIET_SLICES = 3;

/** A thread's name in /proc/<pid>/task/<tid>/stat, cut to 15 characters by the kernel. */
const COMPILER_THREAD = /^C[12] CompilerThre/;

/**
 * User plus system ticks of each of the JVM's compiler threads, by thread id, from the text of each
 * thread's stat file (`<tid> (<name>) <state> …`); null when none is a compiler thread.
 */
export function compilerTicksOf(statFiles: readonly string[]): Map<string, number> | null {
  const ticks = new Map<string, number>();
  for (const stat of statFiles) {
    const open = stat.indexOf('(');
    const close = stat.lastIndexOf(')');
    if (open < 0 || close < open) continue;
    if (!COMPILER_THREAD.test(stat.slice(open + 1, close))) continue;
    // Fields after the name, numbered from 1 over the whole line: utime(14) stime(15).
    const fields = stat.slice(close + 2).split(' ');
    const used = Number(fields[11]) + Number(fields[12]);
    if (Number.isFinite(used)) ticks.set(stat.slice(0, open).trim(), used);
  }
  return ticks.size > 0 ? ticks : null;
}

/**
 * CPU milliseconds the compiler threads of JVM `pid` have used so far, by thread id; null where
 * /proc cannot tell. By thread, because the JVM starts and ends extra compiler threads as its
 * queue grows and shrinks (on machines of more cores than this one): a sum over the threads alive
 * now would lose an ended thread's history and could go down.
 */
export function compilerCpuMs(pid: number): Map<string, number> | null {
  const stats: string[] = [];
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      try {
        stats.push(readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8'));
      } catch {
        // the thread ended while we looked
      }
    }
  } catch {
    return null;
  }
  const ticks = compilerTicksOf(stats);
  if (ticks === null) return null;
  const hz = ticksPerSecond();
  return new Map([...ticks].map(([tid, value]) => [tid, (value * 1000) / hz]));
}

/** CPU milliseconds the compiler threads used between two readings: a thread new since `before` counts from 0. */
export function compilerMsBetween(before: ReadonlyMap<string, number>, after: ReadonlyMap<string, number>): number {
  let used = 0;
  for (const [tid, ms] of after) used += Math.max(0, ms - (before.get(tid) ?? 0));
  return used;
}

/** How the warm-up waited for the broker's compilers (in a suite's report). */
export interface BrokerSettle {
  /** Seconds of warm-up load it took (slices included, the suite's own warm-up not). */
  readonly seconds: number;
  /** Whether the compilers went quiet within the limit. */
  readonly settled: boolean;
  /** The compilers' share of one core in each slice, percent. */
  readonly compilerPercent: readonly number[];
  /** Their share over the last QUIET_SLICES slices (or fewer, if it stopped sooner), percent: what the verdict read. */
  readonly windowPercent: number;
}

export interface SettleOptions {
  /** Most seconds of load to spend; 0 skips the wait. */
  readonly maxSeconds: number;
  /** Reads the compilers' CPU milliseconds so far, by thread (null: unknown, and the wait is skipped). */
  readonly compilerMs: () => ReadonlyMap<string, number> | null;
  /** Runs the warm-up load for about `seconds`. */
  readonly load: (seconds: number) => Promise<unknown>;
  readonly log: (message: string) => void;
  readonly label: string;
  readonly now?: () => number;
  /** Called after each slice (Ctrl-C). */
  readonly checkInterrupted?: () => void;
}

/**
 * Runs the warm-up load in slices until the broker's compilers used less than JIT_QUIET_PERCENT of
 * a core over the last QUIET_SLICES slices, or until `maxSeconds` of load. The limit is looked at
 * after each slice, so the load may run up to a slice longer; under QUIET_SLICES slices' worth it
 * cannot end settled. Null when there is nothing to wait for (`maxSeconds` 0, or /proc cannot tell).
 */
export async function settleCompilers(options: SettleOptions): Promise<BrokerSettle | null> {
  const now = options.now ?? (() => performance.now());
  if (options.maxSeconds <= 0) return null;
  if (options.compilerMs() === null) {
    options.log(`${options.label}: cannot read the broker's compiler threads; not waiting for them`);
    return null;
  }
  const started = now();
  const compilerPercent: number[] = [];
  const window: Array<{ readonly ms: number; readonly compilerMs: number }> = [];
  for (;;) {
    const sliceStarted = now();
    const before = options.compilerMs();
    await options.load(SETTLE_SLICE_SECONDS);
    options.checkInterrupted?.();
    const after = options.compilerMs();
    const sliceEnded = now();
    const seconds = Math.round((sliceEnded - started) / 100) / 10;
    if (before === null || after === null) {
      options.log(`${options.label}: the broker's compiler threads went away; not waiting for them`);
      return { seconds, settled: false, compilerPercent, windowPercent: NaN };
    }
    const slice = { ms: Math.max(1, sliceEnded - sliceStarted), compilerMs: compilerMsBetween(before, after) };
    compilerPercent.push(percentOf(slice));
    window.push(slice);
    if (window.length > QUIET_SLICES) window.shift();
    const recent = percentOf({ ms: sum(window.map((entry) => entry.ms)), compilerMs: sum(window.map((entry) => entry.compilerMs)) });
    options.log(`${options.label}: broker warm-up, ${seconds} s: its JIT compilers used ${percentOf(slice)}% of a core in the last slice`);
    if (window.length === QUIET_SLICES && recent < JIT_QUIET_PERCENT) {
      options.log(`${options.label}: the broker's JIT compilers are quiet (${recent}% of a core over ${QUIET_SLICES * SETTLE_SLICE_SECONDS} s) after ${seconds} s of load`);
      return { seconds, settled: true, compilerPercent, windowPercent: recent };
    }
    if (seconds >= options.maxSeconds) {
      options.log(`${options.label}: the broker's JIT compilers still use ${recent}% of a core after ${seconds} s of load; measuring anyway`);
      return { seconds, settled: false, compilerPercent, windowPercent: recent };
    }
  }
}

function percentOf(slice: { readonly ms: number; readonly compilerMs: number }): number {
  return Math.round((slice.compilerMs / slice.ms) * 1000) / 10;
}

function sum(values: readonly number[]): number {
  return values.reduce((total, value) => total + value, 0);
}
