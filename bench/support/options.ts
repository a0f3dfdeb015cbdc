export const TARGET_NAMES = ['embedded', 'distributed', 'kafka-floor', 'baseline'] as const;
export type TargetName = (typeof TARGET_NAMES)[number];

/** The suites that take these options: `http` (bench/run.ts) and `missions` (bench/missions.ts). */
export type Suite = 'http' | 'missions';

/** The targets each suite knows (the baseline and the Kafka floor have no missions to run). */
export const SUITE_TARGETS: Readonly<Record<Suite, readonly TargetName[]>> = {
  http: TARGET_NAMES,
  missions: ['embedded', 'distributed'],
};

/** Connection counts of a full http run: one client alone, and the load the goals are read at. */
export const DEFAULT_CONNECTIONS: readonly number[] = [1, 50];

export interface BenchOptions {
  readonly suite: Suite;
  readonly mode: 'full' | 'quick';
  /** Seconds of warm-up load before each measured run (its numbers are discarded). */
  readonly warmupSeconds: number;
  /**
   * Most seconds of extra warm-up load, on a target with a broker started for the run, until the
   * broker's JIT compilers are quiet (0: none).
   */
  readonly settleSeconds: number;
  /** Seconds of the measured run (missions: of submitting). */
  readonly durationSeconds: number;
  /** http: each target is measured once per connection count, ascending. */
  readonly connections: readonly number[];
  readonly pipelining: number;
  /** Tenants whose missions are read (each with its own token); the load cycles through them. */
  readonly tenants: number;
  /** Offered load in req/s over all connections; undefined: as fast as the target answers. */
  readonly rate?: number;
  /** Seconds after which a request counts as timed out. */
  readonly timeoutSeconds: number;
  readonly targets: readonly TargetName[];
  /** missions: clients submitting at once in the throughput run. */
  readonly clients: number;
  /** missions: missions submitted one after the other and awaited, for the latency figures. */
  readonly samples: number;
  /** Directory for V8 CPU profiles of the servers; profiling skews the numbers. */
  readonly cpuProfDir?: string;
  /** Directory for V8 allocation profiles of the servers (sampled, collected objects included); profiling skews the numbers. */
  readonly allocProfDir?: string;
  /** Before each measured run, wait up to this many seconds for other work on the machine to calm down. */
  readonly waitQuietSeconds: number;
  /** Whether bench/results/ files are written. */
  readonly write: boolean;
}

const COMMON_USAGE = `  --targets=<list>      comma-separated subset of {targets} (BENCH_TARGETS)
  --cpu-prof[=<dir>]    profile the servers' CPU (profiles in <dir>, default a new temp dir);
                        results are not written
  --alloc-prof[=<dir>]  profile what the servers allocate, collected objects included (profiles
                        in <dir>, default a new temp dir); results are not written
  --settle=<s>          with a Kafka broker started for the run, read the prepared mission until the
                        broker's JIT compilers use less than 5% of a core over 15 s, for at most
                        <s> s, looked at every 5 s (BENCH_SETTLE, default 240; quick: 0, no wait)
  --wait-quiet[=<s>]    before each measured run, wait up to <s> s (default 300) until other
                        processes use less than a quarter of a core, and measure up to 3 times if
                        they get busy during the run, keeping the quietest run (BENCH_WAIT_QUIET)
  --write / --no-write  force writing the results or not (default: written by a full run of
                        all targets without profiling; to {files})
  --help`;

const ENVIRONMENT_USAGE = `Environment: KAFKA_BROKERS (use this broker instead of starting one), BENCH_POSTGRES_URL
(server for the distributed target's fresh database, default postgres://postgres@127.0.0.1:5432/postgres),
TEST_REDIS_URL (the distributed gateway's Redis, as in the integration suite).`;

export const USAGE = `usage: npm run bench -- http [options]

  --quick               short sanity run (warm-up 1 s, measured 3 s); results are not written
  --duration=<s>        measured seconds per run              (BENCH_DURATION, default 10)
  --warmup=<s>          warm-up seconds per run               (BENCH_WARMUP, default 5)
  --connections=<list>  concurrent connections; each target is measured once per count
                        (BENCH_CONNECTIONS, default ${DEFAULT_CONNECTIONS.join(',')})
  --pipelining=<n>      requests in flight per connection     (BENCH_PIPELINING, default 1)
  --tenants=<n>         tenants read in turn, each its own mission and token (BENCH_TENANTS, default 1)
  --rate=<req/s>        offered load over all connections (each count of --connections gets
                        all of it), evenly spaced, latency from when each request was due
                        (BENCH_RATE, default: none, i.e. saturation)
  --timeout=<s>         request timeout                       (BENCH_TIMEOUT, default 10)
${COMMON_USAGE.replace('{targets}', SUITE_TARGETS.http.join(',')).replace('{files}', 'bench/results/<date>.{json,md}')}

${ENVIRONMENT_USAGE}`;

export const MISSIONS_USAGE = `usage: npm run bench -- missions [options]

  --quick               short sanity run (20 sequential missions, warm-up 1 s, submitting 3 s);
                        results are not written
  --samples=<n>         missions submitted one after the other, each awaited (BENCH_SAMPLES, default 200)
  --clients=<n>         clients submitting at once in the throughput run (BENCH_CLIENTS, default 32)
  --duration=<s>        seconds the clients submit            (BENCH_DURATION, default 10)
  --warmup=<s>          seconds of the same load before, discarded once final (BENCH_WARMUP, default 5)
  --timeout=<s>         request timeout                       (BENCH_TIMEOUT, default 10)
${COMMON_USAGE.replace('{targets}', SUITE_TARGETS.missions.join(',')).replace('{files}', 'bench/results/missions-<date>.{json,md}')}

${ENVIRONMENT_USAGE}`;

export function usage(suite: Suite): string {
  return suite === 'http' ? USAGE : MISSIONS_USAGE;
}

export class UsageError extends Error {}

/** Most seconds a full run waits for a fresh broker's JIT compilers (seen here: busy for the first 50-115 s of load). */
export const DEFAULT_SETTLE_SECONDS = 240;

/** Seconds, 0 or more (an empty value is refused, not read as 0). */
export function nonNegative(name: string, raw: string): number {
  const value = Number(raw);
  if (raw.trim() === '' || !Number.isFinite(value) || value < 0) throw new UsageError(`${name} must be a number of seconds, 0 or more, not "${raw}"`);
  return value;
}

function positive(name: string, raw: string, integer: boolean): number {
  const value = Number(raw);
  if (!Number.isFinite(value) || value <= 0 || (integer && !Number.isInteger(value))) {
    throw new UsageError(`${name} must be a positive ${integer ? 'integer' : 'number'}, not "${raw}"`);
  }
  return value;
}

const COMMON_FLAGS = ['quick', 'duration', 'warmup', 'settle', 'timeout', 'targets', 'cpu-prof', 'alloc-prof', 'wait-quiet', 'write', 'no-write', 'help'];
const SUITE_FLAGS: Readonly<Record<Suite, readonly string[]>> = {
  http: [...COMMON_FLAGS, 'connections', 'pipelining', 'tenants', 'rate'],
  missions: [...COMMON_FLAGS, 'clients', 'samples'],
};

/** Flags win over environment variables, which win over the mode's defaults. */
export function parseOptions(argv: readonly string[], env: NodeJS.ProcessEnv = process.env, suite: Suite = 'http'): BenchOptions | 'help' {
  const flags = new Map<string, string | true>();
  for (const arg of argv) {
    const match = /^--([a-z-]+)(?:=(.*))?$/.exec(arg);
    if (!match?.[1]) throw new UsageError(`Unknown argument "${arg}"`);
    flags.set(match[1], match[2] ?? true);
  }
  const known = new Set(SUITE_FLAGS[suite]);
  for (const name of flags.keys())
    if (!known.has(name)) throw new UsageError(`Unknown option --${name} (the ${suite} suite's: ${[...known].map((flag) => `--${flag}`).join(' ')})`);
  if (flags.has('help')) return 'help';

  const setting = (flag: string, variable: string): string | undefined => {
    const value = flags.get(flag);
    if (value === true) throw new UsageError(`--${flag} needs a value (--${flag}=...)`);
    return value ?? (env[variable] || undefined);
  };

  const mode = flags.has('quick') ? 'quick' : 'full';
  const number = (flag: string, variable: string, fallback: number, integer: boolean): number => {
    if (!known.has(flag)) return fallback;
    const raw = setting(flag, variable);
    return raw === undefined ? fallback : positive(`--${flag} / ${variable}`, raw, integer);
  };

  const suiteTargets = SUITE_TARGETS[suite];
  const targetList = setting('targets', 'BENCH_TARGETS');
  const targets =
    targetList === undefined
      ? [...suiteTargets]
      : targetList
          .split(',')
          .map((name) => name.trim())
          .filter(Boolean);
  for (const name of targets) {
    if (!(suiteTargets as readonly string[]).includes(name)) throw new UsageError(`Unknown target "${name}" (known: ${suiteTargets.join(', ')})`);
  }
  if (targets.length === 0) throw new UsageError('--targets lists no target');

  const connectionList = suite === 'http' ? setting('connections', 'BENCH_CONNECTIONS') : undefined;
  const connections =
    connectionList === undefined
      ? [...DEFAULT_CONNECTIONS]
      : [
          ...new Set(
            connectionList
              .split(',')
              .map((value) => value.trim())
              .filter(Boolean)
              .map((value) => positive('--connections / BENCH_CONNECTIONS', value, true)),
          ),
        ].sort((a, b) => a - b);
  if (connections.length === 0) throw new UsageError('--connections lists no count');

  const settle = setting('settle', 'BENCH_SETTLE');
  const rateSetting = suite === 'http' ? setting('rate', 'BENCH_RATE') : undefined;
  const waitQuiet = flags.get('wait-quiet') ?? (env.BENCH_WAIT_QUIET || undefined);
  const cpuProf = flags.get('cpu-prof');
  const cpuProfDir = cpuProf === undefined ? undefined : cpuProf === true ? '' : cpuProf;
  const allocProf = flags.get('alloc-prof');
  const allocProfDir = allocProf === undefined ? undefined : allocProf === true ? '' : allocProf;
  if (flags.has('write') && flags.has('no-write')) throw new UsageError('--write and --no-write contradict each other');
  if (rateSetting !== undefined && number('pipelining', 'BENCH_PIPELINING', 1, true) !== 1) {
    throw new UsageError('--rate paces one request per connection at a time: it takes no --pipelining');
  }
  // By default only a full run of all the suite's targets writes the day's results (a partial run has no ratios).
  const write = flags.has('write')
    ? true
    : flags.has('no-write')
      ? false
      : mode === 'full' && cpuProfDir === undefined && allocProfDir === undefined && suiteTargets.every((name) => targets.includes(name));

  return {
    suite,
    mode,
    warmupSeconds: number('warmup', 'BENCH_WARMUP', mode === 'quick' ? 1 : 5, false),
    settleSeconds: settle === undefined ? (mode === 'quick' ? 0 : DEFAULT_SETTLE_SECONDS) : nonNegative('--settle / BENCH_SETTLE', settle),
    durationSeconds: number('duration', 'BENCH_DURATION', mode === 'quick' ? 3 : 10, true),
    connections,
    pipelining: number('pipelining', 'BENCH_PIPELINING', 1, true),
    tenants: number('tenants', 'BENCH_TENANTS', 1, true),
    rate: rateSetting === undefined ? undefined : positive('--rate / BENCH_RATE', rateSetting, true),
    timeoutSeconds: number('timeout', 'BENCH_TIMEOUT', 10, false),
    // Always in the same order: the baseline reuses the body of a mission measured before it.
    targets: suiteTargets.filter((name) => targets.includes(name)),
    clients: number('clients', 'BENCH_CLIENTS', 32, true),
    samples: number('samples', 'BENCH_SAMPLES', mode === 'quick' ? 20 : 200, true),
    cpuProfDir,
    allocProfDir,
    waitQuietSeconds: waitQuiet === undefined ? 0 : waitQuiet === true ? 300 : positive('--wait-quiet / BENCH_WAIT_QUIET', waitQuiet, false),
    write,
  };
}

/**
 * A suite's options from its command line, or the exit code when there is nothing to run: 0
 * after printing `usage` for --help, 2 after printing the problem and `usage`.
 */
export function optionsOrExit(suite: Suite, usage: string, argv: readonly string[] = process.argv.slice(2), env: NodeJS.ProcessEnv = process.env): BenchOptions | number {
  let parsed: ReturnType<typeof parseOptions>;
  try {
    parsed = parseOptions(argv, env, suite);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    process.stderr.write(`${error.message}\n\n${usage}\n`);
    return 2;
  }
  if (parsed === 'help') {
    process.stdout.write(`${usage}\n`);
    return 0;
  }
  return parsed;
}
