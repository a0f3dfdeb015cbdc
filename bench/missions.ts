/**
 * `npm run bench -- missions`: missions tried as a new user would, through the API, on the
 * embedded and the distributed wiring (started as the http suite starts them, with the same
 * enterprise tenant at the highest rpm).
 *
 * - Sequential: one client submits a one-step mission (`POST /api/missions`, steps
 *   `[{ "type": "brain.query" }]`), polls `GET /api/missions/:id` back to back until it is final,
 *   and only then submits the next one. Latency: from sending the submission to the answer that
 *   shows `succeeded`; p50, p90, p99 and the submission's own p50.
 * - Throughput: `--clients` clients (32) each submit as fast as their submissions are accepted for
 *   `--duration` seconds. Nothing is polled while they submit; after the last submission one
 *   poller asks `GET /api/missions?status=queued&limit=1`, then `?status=running&limit=1`, every
 *   100 ms until both lists are empty. The clock stops at the latest `completedAt` of the accepted
 *   missions (same machine, same clock), read afterwards by paging `?status=succeeded&limit=100`,
 *   which also checks that every accepted mission succeeded. Missions/s end to end = accepted ÷
 *   time from the first submission to the last mission final.
 *
 * Every submission must be a 202 and every mission must end `succeeded`; otherwise the run is
 * flagged (exit code 1). CPU per mission of every server process (the Kafka broker among them)
 * comes from /proc as in the http suite. See bench/README.md.
 */
import { FINAL_MISSION_STATUSES, type MissionStatus, type MissionView } from '@mission/contracts';
import { cpuBetween, cpuMsPer, cpuSnapshot, type CpuReport } from './support/cpu';
import { finishReport, Harness, infrastructureOf, quietestOf, TargetStartError } from './support/harness';
import type { BrokerSettle } from './support/jit';
import { BenchOptions, MISSIONS_USAGE, optionsOrExit } from './support/options';
import { BenchReport, brokerMs, cpuMsText, cpuUseTable, foreignCpu, gitInfo, machineInfo, noiseWarnings, perUnitText, settleText, totalMs } from './support/report';
import { percentiles, Percentiles, round2 } from './support/stats';
import { PreparedTarget, startTarget, TargetContext } from './support/targets';

const harness = new Harness('bench:missions');
const { log, cleanup } = harness;

/** What every client submits: a mission of one Brain query (the tenant's Brain is empty, so it answers at once). */
const MISSION_BODY = { title: 'Benchmark mission', objective: 'What do we know about microwave dielectrics?', steps: [{ type: 'brain.query' }] };
const MISSION_JSON = JSON.stringify(MISSION_BODY);

/** Interval of the poller that waits for the throughput run's missions to be final. */
const POLL_INTERVAL_MS = 100;
/** The statuses a one-step Brain mission passes through before it is final, in that order. */
const PENDING_STATUSES: readonly MissionStatus[] = ['queued', 'running'];
/** How long one sequential mission may take to be final before the run is flagged. */
const MISSION_TIMEOUT_MS = 60_000;
/** At most this many missions that did not succeed are fetched one by one to report their status. */
const FAILED_LOOKUPS = 50;

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
/** Problems of a run: counts by kind and the first few messages. */
class Problems {
  readonly counts: Record<string, number> = {};
  readonly samples: string[] = [];

  add(kind: string, detail?: string): void {
    this.counts[kind] = (this.counts[kind] ?? 0) + 1;
    if (detail && this.samples.length < 5 && !this.samples.includes(detail)) this.samples.push(detail);
  }

  get total(): number {
    return Object.values(this.counts).reduce((sum, value) => sum + value, 0);
  }

  flags(prefix: string): string[] {
    if (this.total === 0) return [];
    const kinds = Object.entries(this.counts)
      .map(([kind, count]) => `${count} × ${kind}`)
      .join(', ');
    return [`${prefix}: ${kinds}${this.samples.length ? ` (${this.samples.join('; ')})` : ''}`];
  }
}

/** A client of the target's API with the tenant's token; every request has the suite's timeout. */
class Api {
  constructor(
    private readonly origin: string,
    private readonly token: string,
    private readonly timeoutMs: number,
  ) {}

  async request(method: 'GET' | 'POST', requestPath: string, body?: string): Promise<{ status: number; body: any; text: string }> {
    const headers: Record<string, string> = { authorization: `Bearer ${this.token}` };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const response = await fetch(`${this.origin}${requestPath}`, { method, headers, body, signal: AbortSignal.timeout(this.timeoutMs) });
    const text = await response.text();
    let parsed: unknown;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = undefined;
    }
    return { status: response.status, body: parsed, text };
  }

  submit() {
    return this.request('POST', '/api/missions', MISSION_JSON);
  }
}

const errorText = (error: unknown): string => (error instanceof Error ? `${error.name}: ${error.message}` : String(error));
const brief = (text: string): string => (text.length > 200 ? `${text.slice(0, 200)}…` : text);

// ---------------------------------------------------------------------------------------------
// Sequential: submit, poll until final, next.

interface SequentialRun {
  readonly missions: number;
  /** Submission sent → 202 received. */
  readonly submitMs: Percentiles;
  /** Submission sent → the GET that shows the mission `succeeded` answered. */
  readonly succeededMs: Percentiles;
  /** Submission sent → the mission's `completedAt` (the server's clock, same machine; whole milliseconds). */
  readonly completedAtMs: Percentiles;
  /** GETs per mission until it showed final. */
  readonly pollsPerMission: number;
  readonly problems: { readonly counts: Record<string, number>; readonly samples: string[] };
  readonly cpu: CpuReport | null;
  readonly cpuMsPerMission: Record<string, number> | null;
  readonly flags: string[];
  readonly warnings: string[];
  readonly foreign: number;
}

/** One mission: submit, then GET it back to back until it is final. */
async function oneMission(api: Api, problems: Problems): Promise<{ submitMs: number; succeededMs: number; completedAtMs: number; polls: number } | undefined> {
  const sentWall = Date.now();
  const sent = performance.now();
  let submitted;
  try {
    submitted = await api.submit();
  } catch (error) {
    problems.add('submission error', errorText(error));
    return undefined;
  }
  const submitMs = performance.now() - sent;
  if (submitted.status !== 202 || typeof submitted.body?.id !== 'string') {
    problems.add(`submission answered ${submitted.status}`, brief(submitted.text));
    return undefined;
  }
  const id = submitted.body.id as string;
  for (let polls = 1; ; polls++) {
    let response;
    try {
      response = await api.request('GET', `/api/missions/${id}`);
    } catch (error) {
      problems.add('poll error', errorText(error));
      return undefined;
    }
    if (response.status !== 200) {
      problems.add(`poll answered ${response.status}`, brief(response.text));
      return undefined;
    }
    const mission = response.body as MissionView;
    if (FINAL_MISSION_STATUSES.includes(mission.status)) {
      const succeededMs = performance.now() - sent;
      if (mission.status !== 'succeeded') {
        problems.add(`mission ${mission.status}`, `${id}: ${JSON.stringify(mission.error ?? {})}`);
        return undefined;
      }
      const completedAtMs = mission.completedAt ? Date.parse(mission.completedAt) - sentWall : NaN;
      return { submitMs, succeededMs, completedAtMs, polls };
    }
    if (performance.now() - sent > MISSION_TIMEOUT_MS) {
      problems.add('mission not final in time', `${id} still ${mission.status} after ${MISSION_TIMEOUT_MS / 1000} s`);
      return undefined;
    }
    harness.checkInterrupted();
  }
}

async function sequentialOnce(target: PreparedTarget, api: Api, options: BenchOptions, cores: number): Promise<SequentialRun> {
  const label = `${target.name} sequential`;
  if (options.waitQuietSeconds > 0) await harness.waitQuiet(target, options.waitQuietSeconds, cores);
  // Warm as the http suite's targets are (--warmup seconds of the same load), and at least a tenth
  // of the samples (at most 20): after a fresh start the first thousand or so missions are slower
  // while the JIT compiles the path, which a one-at-a-time run of 200 would otherwise mostly measure.
  const warmupMissions = Math.min(20, Math.ceil(options.samples / 10));
  const warmupStarted = performance.now();
  const warmupProblems = new Problems();
  let warmedUp = 0;
  while (warmedUp < warmupMissions || performance.now() - warmupStarted < options.warmupSeconds * 1000) {
    await oneMission(api, warmupProblems);
    warmedUp++;
    harness.checkInterrupted();
  }
  log(`${label}: warm-up: ${warmedUp} missions one at a time in ${((performance.now() - warmupStarted) / 1000).toFixed(1)} s; now ${options.samples} measured`);
  const problems = new Problems();
  const submitMs: number[] = [];
  const succeededMs: number[] = [];
  const completedAtMs: number[] = [];
  let polls = 0;
  const before = cpuSnapshot();
  for (let i = 0; i < options.samples; i++) {
    const sample = await oneMission(api, problems);
    harness.checkInterrupted();
    if (!sample) continue;
    submitMs.push(sample.submitMs);
    succeededMs.push(sample.succeededMs);
    if (Number.isFinite(sample.completedAtMs)) completedAtMs.push(sample.completedAtMs);
    polls += sample.polls;
  }
  const cpu = cpuBetween(before, cpuSnapshot(), target.servers, cores, target.databaseName);
  const flags = [...problems.flags('measured missions'), ...warmupProblems.flags('warm-up missions')];
  if (succeededMs.length === 0) flags.push('no mission succeeded');
  const warnings = noiseWarnings(cpu, infrastructureOf(target));
  const run: SequentialRun = {
    missions: options.samples,
    submitMs: percentiles(submitMs),
    succeededMs: percentiles(succeededMs),
    completedAtMs: percentiles(completedAtMs),
    pollsPerMission: round2(succeededMs.length > 0 ? polls / succeededMs.length : NaN),
    problems: { counts: problems.counts, samples: problems.samples },
    cpu,
    cpuMsPerMission: cpuMsPer(cpu, succeededMs.length),
    flags,
    warnings,
    foreign: foreignCpu(cpu, infrastructureOf(target)).total,
  };
  log(
    `${label}: submit p50 ${run.submitMs.p50} ms; submit → succeeded p50 ${run.succeededMs.p50} ms, p99 ${run.succeededMs.p99} ms ` +
      `(${run.pollsPerMission} polls per mission)${flags.length > 0 ? ` — FLAGGED: ${flags.join('; ')}` : ''}`,
  );
  if (cpu) log(`${label}: CPU ms per mission: ${perUnitText(run.cpuMsPerMission)}`);
  for (const warning of warnings) log(`${label}: warning: ${warning}`);
  return run;
}

// ---------------------------------------------------------------------------------------------
// Throughput: many clients submit for a while; the clock stops when the last mission is final.

interface ThroughputLoad {
  readonly accepted: number;
  /** Seconds from the first submission sent to the last submission answered. */
  readonly submitSeconds: number;
  readonly acceptedPerSecond: number;
  /** Submission sent → 202, under this load. */
  readonly submitMs: Percentiles;
  /** Seconds from the first submission sent to the latest `completedAt` of the accepted missions. */
  readonly allFinalSeconds: number;
  /** Seconds from the first submission to the poller seeing no mission queued or running (≥ allFinalSeconds by up to a poll). */
  readonly detectedSeconds: number;
  /** accepted ÷ allFinalSeconds. */
  readonly missionsPerSecond: number;
  /** Per accepted mission: `completedAt` − `createdAt` (server clock), queueing included. */
  readonly createdToFinalMs: Percentiles;
  readonly polls: number;
  readonly problems: { readonly counts: Record<string, number>; readonly samples: string[] };
  readonly cpu: CpuReport | null;
  readonly cpuMsPerMission: Record<string, number> | null;
  readonly flags: string[];
}

/** `clients` clients submitting back to back until `seconds` have passed; resolves with what was accepted. */
async function submitFor(api: Api, clients: number, seconds: number, problems: Problems) {
  const ids: string[] = [];
  const latencies: number[] = [];
  const startedWall = Date.now();
  const started = performance.now();
  const end = started + seconds * 1000;
  let lastAnswered = started;
  const client = async (): Promise<void> => {
    while (performance.now() < end && !harness.interrupted) {
      const sent = performance.now();
      try {
        const response = await api.submit();
        lastAnswered = Math.max(lastAnswered, performance.now());
        if (response.status === 202 && typeof response.body?.id === 'string') {
          ids.push(response.body.id as string);
          latencies.push(performance.now() - sent);
          continue;
        }
        problems.add(`submission answered ${response.status}`, brief(response.text));
      } catch (error) {
        problems.add('submission error', errorText(error));
      }
      await sleep(100); // not a tight loop of failures
    }
  };
  await Promise.all(Array.from({ length: clients }, client));
  return { ids, latencies, startedWall, started, submitSeconds: (lastAnswered - started) / 1000 };
}

/** Polls the tenant's lists until no mission is queued or running; resolves with the polls made, or undefined on timeout. */
async function untilNonePending(api: Api, deadline: number, problems: Problems): Promise<number | undefined> {
  let polls = 0;
  for (;;) {
    let pending = false;
    // In the order a mission passes through them: one that moves on between two requests is still seen.
    for (const status of PENDING_STATUSES) {
      polls++;
      try {
        const response = await api.request('GET', `/api/missions?status=${status}&limit=1`);
        if (response.status !== 200) {
          problems.add(`list answered ${response.status}`, brief(response.text));
          pending = true;
        } else if ((response.body as { items: unknown[] }).items.length > 0) {
          pending = true;
        }
      } catch (error) {
        problems.add('list error', errorText(error));
        pending = true;
      }
      if (pending) break;
    }
    if (!pending) return polls;
    harness.checkInterrupted();
    if (performance.now() > deadline) return undefined;
    await sleep(POLL_INTERVAL_MS);
  }
}

/**
 * Reads every accepted mission back through `?status=succeeded` (newest first, 100 a page) for
 * its timestamps; those not found there did not succeed, and a few are fetched to say why.
 */
async function readBack(api: Api, ids: readonly string[], problems: Problems) {
  const wanted = new Set(ids);
  const found = new Map<string, { createdAt: number; completedAt: number }>();
  let cursor: string | null = null;
  do {
    const query: string = `/api/missions?status=succeeded&limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
    const response = await api.request('GET', query);
    if (response.status !== 200) throw new Error(`GET ${query} answered ${response.status}: ${brief(response.text)}`);
    const page = response.body as { items: MissionView[]; nextCursor: string | null };
    for (const mission of page.items) {
      if (wanted.has(mission.id)) found.set(mission.id, { createdAt: Date.parse(mission.createdAt), completedAt: Date.parse(mission.completedAt ?? '') });
    }
    cursor = page.nextCursor;
    harness.checkInterrupted();
  } while (cursor && found.size < wanted.size);
  const missing = ids.filter((id) => !found.has(id));
  for (const [index, id] of missing.entries()) {
    if (index >= FAILED_LOOKUPS) {
      for (let rest = index; rest < missing.length; rest++) problems.add('mission not succeeded (status not looked up)');
      break;
    }
    const response = await api.request('GET', `/api/missions/${id}`);
    const mission = response.body as MissionView | undefined;
    problems.add(response.status === 200 && mission ? `mission ${mission.status}` : `mission read answered ${response.status}`, `${id}: ${brief(response.text)}`);
  }
  return found;
}

async function throughputLoad(target: PreparedTarget, api: Api, options: BenchOptions, seconds: number, cores: number): Promise<ThroughputLoad> {
  const problems = new Problems();
  const before = cpuSnapshot();
  const load = await submitFor(api, options.clients, seconds, problems);
  harness.checkInterrupted();
  const drainLimitSeconds = Math.max(120, 10 * seconds);
  const polls = await untilNonePending(api, performance.now() + drainLimitSeconds * 1000, problems);
  const detected = performance.now();
  const cpu = cpuBetween(before, cpuSnapshot(), target.servers, cores, target.databaseName);
  harness.checkInterrupted();
  if (polls === undefined) problems.add(`missions still queued or running ${drainLimitSeconds} s after the last submission`);
  const found = await readBack(api, load.ids, problems);
  let lastCompleted = NaN;
  for (const { completedAt } of found.values()) if (Number.isFinite(completedAt) && !(completedAt <= lastCompleted)) lastCompleted = completedAt;
  const detectedSeconds = (detected - load.started) / 1000;
  // Whole milliseconds of the server's clock; without any timestamp, the poller's view.
  const allFinalSeconds = Number.isFinite(lastCompleted) ? Math.max(0, lastCompleted - load.startedWall) / 1000 : detectedSeconds;
  const accepted = load.ids.length;
  const flags = problems.flags('missions');
  if (accepted === 0) flags.push('no submission accepted');
  return {
    accepted,
    submitSeconds: round2(load.submitSeconds),
    acceptedPerSecond: round2(load.submitSeconds > 0 ? accepted / load.submitSeconds : NaN),
    submitMs: percentiles(load.latencies),
    allFinalSeconds: round2(allFinalSeconds),
    detectedSeconds: round2(detectedSeconds),
    missionsPerSecond: round2(allFinalSeconds > 0 ? accepted / allFinalSeconds : NaN),
    createdToFinalMs: percentiles([...found.values()].map((mission) => mission.completedAt - mission.createdAt).filter(Number.isFinite)),
    polls: polls ?? NaN,
    problems: { counts: problems.counts, samples: problems.samples },
    cpu,
    cpuMsPerMission: cpuMsPer(cpu, accepted),
    flags,
  };
}

interface ThroughputRun extends ThroughputLoad {
  readonly clients: number;
  readonly durationSeconds: number;
  readonly warmup: Pick<ThroughputLoad, 'accepted' | 'acceptedPerSecond' | 'allFinalSeconds' | 'missionsPerSecond' | 'flags'> | null;
  readonly warnings: string[];
  readonly foreign: number;
}

async function throughputOnce(target: PreparedTarget, api: Api, options: BenchOptions, cores: number): Promise<ThroughputRun> {
  const label = `${target.name} throughput`;
  if (options.waitQuietSeconds > 0) await harness.waitQuiet(target, options.waitQuietSeconds, cores);
  let warmup: ThroughputRun['warmup'] = null;
  if (options.warmupSeconds > 0) {
    log(`${label}: warming up: ${options.clients} clients submit for ${options.warmupSeconds} s, then all missions final`);
    const run = await throughputLoad(target, api, options, Math.max(1, Math.ceil(options.warmupSeconds)), cores);
    const { accepted, acceptedPerSecond, allFinalSeconds, missionsPerSecond, flags } = run;
    warmup = { accepted, acceptedPerSecond, allFinalSeconds, missionsPerSecond, flags };
    log(`${label}: warm-up ${accepted} accepted, ${missionsPerSecond} missions/s end to end`);
  }
  log(`${label}: ${options.clients} clients submit for ${options.durationSeconds} s`);
  const run = await throughputLoad(target, api, options, options.durationSeconds, cores);
  const flags = [...run.flags, ...(warmup?.flags ?? []).map((flag) => `warm-up ${flag}`)];
  const warnings = noiseWarnings(run.cpu, infrastructureOf(target));
  log(
    `${label}: ${run.accepted} accepted in ${run.submitSeconds} s (${run.acceptedPerSecond}/s), all final after ${run.allFinalSeconds} s ` +
      `(seen by the poller after ${run.detectedSeconds} s, ${run.polls} polls): ` +
      `${run.missionsPerSecond} missions/s end to end${flags.length > 0 ? ` — FLAGGED: ${flags.join('; ')}` : ''}`,
  );
  if (run.cpu) log(`${label}: CPU ms per mission: ${perUnitText(run.cpuMsPerMission)}`);
  for (const warning of warnings) log(`${label}: warning: ${warning}`);
  return { ...run, clients: options.clients, durationSeconds: options.durationSeconds, warmup, flags, warnings, foreign: foreignCpu(run.cpu, infrastructureOf(target)).total };
}

// ---------------------------------------------------------------------------------------------
// Report

interface MissionsTargetResult {
  readonly name: PreparedTarget['name'];
  readonly description: string;
  readonly origin: string;
  readonly startupSeconds: number;
  readonly details: Record<string, unknown>;
  /** The servers' CPU at rest, sampled once after the target came up (and after the broker warm-up). */
  readonly idleCpu: CpuReport | null;
  /** The extra warm-up until the broker's JIT compilers were quiet (null: none). */
  readonly brokerSettle: BrokerSettle | null;
  readonly sequential: Omit<SequentialRun, 'foreign'>;
  readonly throughput: Omit<ThroughputRun, 'foreign'>;
  readonly uncleanExits: string[];
  readonly flags: string[];
  readonly warnings: string[];
}

interface MissionsReport {
  readonly schema: 1;
  readonly suite: 'missions';
  readonly date: string;
  readonly startedAt: string;
  readonly finishedAt: string;
  readonly git: BenchReport['git'];
  readonly machine: BenchReport['machine'];
  readonly parameters: {
    readonly mode: BenchOptions['mode'];
    readonly samples: number;
    readonly clients: number;
    readonly durationSeconds: number;
    readonly warmupSeconds: number;
    /** Most seconds of mission reads spent waiting for a fresh broker's JIT compilers (0: no wait). */
    readonly settleSeconds: number;
    readonly timeoutSeconds: number;
    readonly mission: typeof MISSION_BODY;
    readonly tenant: string;
    readonly polling: string;
    readonly client: string;
    readonly serverEnvironment: string;
    readonly cpuProfile: boolean;
    readonly allocProfile?: boolean;
    readonly waitQuietSeconds: number;
  };
  readonly targets: MissionsTargetResult[];
  readonly ok: boolean;
}

const ms = (value: number): string => (Number.isFinite(value) ? value.toFixed(value >= 100 ? 0 : 1) : '–');
const count = (value: number): string => (Number.isFinite(value) ? Math.round(value).toLocaleString('en-US') : '–');
const rate = (value: number): string => (Number.isFinite(value) ? value.toFixed(value >= 100 ? 0 : 1) : '–');
const problemsText = (problems: { counts: Record<string, number> }): string => {
  const total = Object.values(problems.counts).reduce((sum, value) => sum + value, 0);
  return total === 0 ? '0' : `**${total}**`;
};

function missionsTables(results: readonly MissionsTargetResult[]): string {
  const sequential = [
    '| target | missions | submit p50 ms | submit → succeeded p50 ms | p90 ms | p99 ms | max ms | polls / mission | submit → completedAt p50 ms | broker CPU ms/mission | all servers CPU ms/mission | problems |',
    '|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|',
  ];
  for (const { name, sequential: run } of results) {
    sequential.push(
      `| ${run.flags.length > 0 ? `${name} ⚠` : name} | ${run.missions} | ${ms(run.submitMs.p50)} | ${ms(run.succeededMs.p50)} | ${ms(run.succeededMs.p90)} | ${ms(run.succeededMs.p99)} | ${ms(run.succeededMs.max)} | ` +
        `${Number.isFinite(run.pollsPerMission) ? run.pollsPerMission : '–'} | ${ms(run.completedAtMs.p50)} | ${cpuMsText(brokerMs(run.cpuMsPerMission))} | ${cpuMsText(totalMs(run.cpuMsPerMission))} | ${problemsText(run.problems)} |`,
    );
  }
  const throughput = [
    '| target | clients | accepted | accepted/s | submit p50 ms | submit p99 ms | all final after s | missions/s end to end | created → final p50 ms | p99 ms | broker CPU ms/mission | all servers CPU ms/mission | problems |',
    '|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|',
  ];
  for (const { name, throughput: run } of results) {
    throughput.push(
      `| ${run.flags.length > 0 ? `${name} ⚠` : name} | ${run.clients} | ${count(run.accepted)} | ${rate(run.acceptedPerSecond)} | ${ms(run.submitMs.p50)} | ${ms(run.submitMs.p99)} | ` +
        `${run.allFinalSeconds.toFixed(2)} | ${rate(run.missionsPerSecond)} | ${ms(run.createdToFinalMs.p50)} | ${ms(run.createdToFinalMs.p99)} | ` +
        `${cpuMsText(brokerMs(run.cpuMsPerMission))} | ${cpuMsText(totalMs(run.cpuMsPerMission))} | ${problemsText(run.problems)} |`,
    );
  }
  return [
    `Sequential (one client, one mission at a time):`,
    '',
    ...sequential,
    '',
    `Throughput (clients submitting back to back, then until the last mission is final):`,
    '',
    ...throughput,
  ].join('\n');
}

function markdownReport(report: MissionsReport): string {
  const { machine, parameters, git: commit } = report;
  const lines = [
    `# Missions benchmark ${report.date}`,
    '',
    `One-step missions (\`${JSON.stringify(parameters.mission.steps)}\`) through the API, ${parameters.tenant}. ` +
      `Sequential: ${parameters.samples} missions, one at a time. Throughput: ${parameters.clients} clients submitting for ${parameters.durationSeconds} s ` +
      `after ${parameters.warmupSeconds} s of the same load (${parameters.mode} mode${parameters.cpuProfile ? ', servers under --cpu-prof' : ''}${parameters.allocProfile ? ', servers under --alloc-prof' : ''}).`,
    `Commit \`${commit.commit.slice(0, 12)}\` (${commit.branch}${commit.dirty ? `, plus ${commit.changes.length} uncommitted change(s) outside bench/` : ''}), ` +
      `${machine.cpus} × ${machine.cpuModel}, ${machine.memoryGiB} GiB, Node ${machine.node}, ${machine.platform} ${machine.release}, started ${report.startedAt}.`,
    '',
    missionsTables(report.targets),
    '',
    `Sequential latency: from sending the submission to the \`GET /api/missions/:id\` (sent back to back) that shows \`succeeded\`; ` +
      "submit → completedAt: to the mission's own completedAt instead (server clock, same machine, whole milliseconds). " +
      `Throughput: ${parameters.polling} ` +
      "CPU ms/mission: CPU time of the Kafka broker started for the run and of all the target's processes over the phase, divided by its missions (sequential: the polls included).",
  ];
  const settle = settleText(report.targets, parameters.settleSeconds);
  if (settle) lines.push('', settle);
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
  const cpu = cpuUseTable(
    report.targets.flatMap((result) => [
      { label: `${result.name} sequential`, cpu: result.sequential.cpu },
      { label: `${result.name} throughput`, cpu: result.throughput.cpu },
    ]),
  );
  if (cpu) lines.push('', 'CPU during each measured phase (100% = one core; the client is the benchmark process):', '', cpu);
  const idle = cpuUseTable(report.targets.map((result) => ({ label: result.name, cpu: result.idleCpu })));
  if (idle)
    lines.push(
      '',
      'CPU at rest (a few seconds without load once the target was up, and for a target with a broker after the broker warm-up; part of every CPU-per-mission figure, most visibly in the sequential one):',
      '',
      idle,
    );
  const perMission = ['| run | CPU ms per mission, by process |', '|---|---|'];
  for (const result of report.targets) {
    if (result.sequential.cpuMsPerMission) perMission.push(`| ${result.name} sequential | ${perUnitText(result.sequential.cpuMsPerMission)} |`);
    if (result.throughput.cpuMsPerMission) perMission.push(`| ${result.name} throughput | ${perUnitText(result.throughput.cpuMsPerMission)} |`);
  }
  if (perMission.length > 2) lines.push('', 'CPU per mission:', '', perMission.join('\n'));
  return `${lines.join('\n')}\n`;
}

// ---------------------------------------------------------------------------------------------

async function main(): Promise<number> {
  const options = optionsOrExit('missions', MISSIONS_USAGE);
  if (typeof options === 'number') return options;
  const startedAt = new Date();
  const machine = machineInfo();
  const context: TargetContext = { cleanup, log, tenants: 1, serverEnv: harness.serverEnv(options) };
  log(
    `${options.mode} run: ${options.targets.join(', ')}; ${options.samples} sequential missions; ${options.clients} clients submitting for ` +
      `${options.durationSeconds} s after ${options.warmupSeconds} s of warm-up; ${machine.cpus} cpus, node ${machine.node}`,
  );

  const results: MissionsTargetResult[] = [];
  for (const name of options.targets) {
    log(`${name}: starting`);
    let target: PreparedTarget;
    try {
      target = await startTarget(name, context);
    } catch (error) {
      harness.checkInterrupted();
      throw new TargetStartError(`The ${name} target could not start: ${error instanceof Error ? error.message : String(error)}`);
    }
    harness.checkInterrupted();
    log(`${name}: up after ${target.startupSeconds.toFixed(1)} s`);
    if (!target.token) throw new Error(`The ${name} target has no tenant token`);
    const api = new Api(target.origin, target.token, options.timeoutSeconds * 1000);
    const brokerSettle = await harness.settleBroker(target, options.settleSeconds);
    // At rest after that warm-up, as a broker in service is.
    const idleCpu = await harness.idleCpu(target, machine.cpus);
    const { foreign: _sequentialForeign, ...sequential } = await quietestOf(harness, `${name} sequential`, options.waitQuietSeconds, () =>
      sequentialOnce(target, api, options, machine.cpus),
    );
    harness.checkInterrupted();
    const { foreign: _throughputForeign, ...throughput } = await quietestOf(harness, `${name} throughput`, options.waitQuietSeconds, () =>
      throughputOnce(target, api, options, machine.cpus),
    );
    harness.checkInterrupted();
    log(`${name}: stopping`);
    const unclean = await target.stop();
    if (unclean.length > 0) log(`${name}: not every process exited cleanly: ${unclean.join(', ')}`);
    results.push({
      name,
      description: target.description,
      origin: target.origin,
      startupSeconds: Math.round(target.startupSeconds * 10) / 10,
      details: target.details,
      idleCpu,
      brokerSettle,
      sequential,
      throughput,
      uncleanExits: unclean,
      flags: [...sequential.flags.map((flag) => `sequential: ${flag}`), ...throughput.flags.map((flag) => `throughput: ${flag}`)],
      warnings: [...sequential.warnings.map((warning) => `sequential: ${warning}`), ...throughput.warnings.map((warning) => `throughput: ${warning}`)],
    });
  }

  const report: MissionsReport = {
    schema: 1,
    suite: 'missions',
    date: startedAt.toISOString().slice(0, 10),
    startedAt: startedAt.toISOString(),
    finishedAt: new Date().toISOString(),
    git: gitInfo(),
    machine,
    parameters: {
      mode: options.mode,
      samples: options.samples,
      clients: options.clients,
      durationSeconds: options.durationSeconds,
      warmupSeconds: options.warmupSeconds,
      settleSeconds: options.settleSeconds,
      timeoutSeconds: options.timeoutSeconds,
      mission: MISSION_BODY,
      tenant: "one enterprise tenant at the highest rpm, its machine client's token",
      polling:
        `no polling while the clients submit; then one poller asks GET /api/missions?status=queued&limit=1, then ?status=running&limit=1, every ${POLL_INTERVAL_MS} ms until both are empty; ` +
        'the clock stops at the latest completedAt of the accepted missions (read by paging ?status=succeeded&limit=100, which checks that each one succeeded).',
      client: 'fetch (undici) in the benchmark process, keep-alive connections (one per request in flight); servers in their own processes',
      serverEnvironment: 'NODE_ENV=test, LOG_LEVEL=warn (as the test suites start them)',
      cpuProfile: options.cpuProfDir !== undefined,
      allocProfile: options.allocProfDir !== undefined,
      waitQuietSeconds: options.waitQuietSeconds,
    },
    targets: results,
    ok: results.every((result) => result.flags.length === 0),
  };

  return finishReport(
    options,
    `missions-${report.date}`,
    report,
    markdownReport(report),
    missionsTables(results),
    'a submission was not accepted or a mission did not succeed (see above)',
    log,
  );
}

harness.run(main);
