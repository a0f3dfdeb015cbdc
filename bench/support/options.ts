export const TARGET_NAMES = ['embedded', 'distributed', 'baseline'] as const;
export type TargetName = (typeof TARGET_NAMES)[number];

export interface BenchOptions {
  readonly mode: 'full' | 'quick';
  /** Seconds of warm-up load before each measured run (its numbers are discarded). */
  readonly warmupSeconds: number;
  /** Seconds of the measured run. */
  readonly durationSeconds: number;
  readonly connections: number;
  readonly pipelining: number;
  /** Tenants whose missions are read (each with its own token); the load cycles through them. */
  readonly tenants: number;
  /** Offered load in req/s over all connections; undefined: as fast as the target answers. */
  readonly rate?: number;
  /** Seconds after which autocannon counts a request as timed out. */
  readonly timeoutSeconds: number;
  readonly targets: readonly TargetName[];
  /** Directory for V8 CPU profiles of the servers; profiling skews the numbers. */
  readonly cpuProfDir?: string;
  /** Before each target's warm-up, wait up to this many seconds for other work on the machine to calm down. */
  readonly waitQuietSeconds: number;
  /** Whether bench/results/<date>.{json,md} are written. */
  readonly write: boolean;
}

export const USAGE = `usage: npm run bench -- [options]

  --quick               short sanity run (warm-up 1 s, measured 3 s); results are not written
  --duration=<s>        measured seconds per target        (BENCH_DURATION, default 10)
  --warmup=<s>          warm-up seconds per target         (BENCH_WARMUP, default 5)
  --connections=<n>     concurrent connections             (BENCH_CONNECTIONS, default 50)
  --pipelining=<n>      requests in flight per connection  (BENCH_PIPELINING, default 1)
  --tenants=<n>         tenants read in turn, each its own mission and token (BENCH_TENANTS, default 1)
  --rate=<req/s>        offered load over all connections  (BENCH_RATE, default: none, i.e. saturation)
  --timeout=<s>         request timeout                    (BENCH_TIMEOUT, default 10)
  --targets=<list>      comma-separated subset of ${TARGET_NAMES.join(',')} (BENCH_TARGETS)
  --cpu-prof[=<dir>]    profile the servers' CPU (profiles in <dir>, default a new temp dir);
                        results are not written
  --wait-quiet[=<s>]    before each target, wait up to <s> s (default 300) until other processes
                        use less than a quarter of a core, and measure up to 3 times if they
                        get busy during the run, keeping the quietest run (BENCH_WAIT_QUIET)
  --write / --no-write  force writing bench/results/<date>.{json,md} or not (default: written by a
                        full run of all targets without --cpu-prof)
  --help

Environment: KAFKA_BROKERS (use this broker instead of starting one), BENCH_POSTGRES_URL
(server for the distributed target's fresh database, default postgres://postgres@127.0.0.1:5432/postgres),
TEST_REDIS_URL (the distributed gateway's Redis, as in the integration suite).`;

export class UsageError extends Error {}

function positive(name: string, raw: string, integer: boolean): number {
  const value = Number(raw);
  if (!Number.isFinite(value) || value <= 0 || (integer && !Number.isInteger(value))) {
    throw new UsageError(`${name} must be a positive ${integer ? 'integer' : 'number'}, not "${raw}"`);
  }
  return value;
}

/** Flags win over environment variables, which win over the mode's defaults. */
export function parseOptions(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): BenchOptions | 'help' {
  const flags = new Map<string, string | true>();
  for (const arg of argv) {
    const match = /^--([a-z-]+)(?:=(.*))?$/.exec(arg);
    if (!match?.[1]) throw new UsageError(`Unknown argument "${arg}"`);
    flags.set(match[1], match[2] ?? true);
  }
  const known = new Set(['quick', 'duration', 'warmup', 'connections', 'pipelining', 'tenants', 'rate', 'timeout', 'targets', 'cpu-prof', 'wait-quiet', 'write', 'no-write', 'help']);
  for (const name of flags.keys()) if (!known.has(name)) throw new UsageError(`Unknown option --${name}`);
  if (flags.has('help')) return 'help';

  const setting = (flag: string, variable: string): string | undefined => {
    const value = flags.get(flag);
    if (value === true) throw new UsageError(`--${flag} needs a value (--${flag}=...)`);
    return value ?? (env[variable] || undefined);
  };

  const mode = flags.has('quick') ? 'quick' : 'full';
  const number = (flag: string, variable: string, fallback: number, integer: boolean): number => {
    const raw = setting(flag, variable);
    return raw === undefined ? fallback : positive(`--${flag} / ${variable}`, raw, integer);
  };

  const targetList = setting('targets', 'BENCH_TARGETS');
  const targets = targetList === undefined ? [...TARGET_NAMES] : targetList.split(',').map((name) => name.trim()).filter(Boolean);
  for (const name of targets) {
    if (!(TARGET_NAMES as readonly string[]).includes(name)) throw new UsageError(`Unknown target "${name}" (known: ${TARGET_NAMES.join(', ')})`);
  }
  if (targets.length === 0) throw new UsageError('--targets lists no target');

  const rateSetting = setting('rate', 'BENCH_RATE');
  const waitQuiet = flags.get('wait-quiet') ?? (env.BENCH_WAIT_QUIET || undefined);
  const cpuProf = flags.get('cpu-prof');
  const cpuProfDir = cpuProf === undefined ? undefined : cpuProf === true ? '' : cpuProf;
  if (flags.has('write') && flags.has('no-write')) throw new UsageError('--write and --no-write contradict each other');
  // By default only a full run of all three targets writes the day's results (a partial run has no ratios).
  const write = flags.has('write') ? true : flags.has('no-write') ? false : mode === 'full' && cpuProfDir === undefined && TARGET_NAMES.every((name) => targets.includes(name));

  return {
    mode,
    warmupSeconds: number('warmup', 'BENCH_WARMUP', mode === 'quick' ? 1 : 5, false),
    durationSeconds: number('duration', 'BENCH_DURATION', mode === 'quick' ? 3 : 10, true),
    connections: number('connections', 'BENCH_CONNECTIONS', 50, true),
    pipelining: number('pipelining', 'BENCH_PIPELINING', 1, true),
    tenants: number('tenants', 'BENCH_TENANTS', 1, true),
    rate: rateSetting === undefined ? undefined : positive('--rate / BENCH_RATE', rateSetting, true),
    timeoutSeconds: number('timeout', 'BENCH_TIMEOUT', 10, false),
    // Always in the same order: the baseline reuses the body of a mission measured before it.
    targets: TARGET_NAMES.filter((name) => targets.includes(name)),
    cpuProfDir,
    waitQuietSeconds: waitQuiet === undefined ? 0 : waitQuiet === true ? 300 : positive('--wait-quiet / BENCH_WAIT_QUIET', waitQuiet, false),
    write,
  };
}
