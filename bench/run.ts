/**
 * `npm run bench -- http`: authenticated GET /api/missions/:id under autocannon against the
 * embedded wiring, the distributed wiring and a bare NestJS-on-Fastify baseline, in one run, each
 * at every connection count asked for (1 and 50 by default). See bench/README.md for how to run it
 * and read the results.
 */
import { cpuBetween, cpuMsPer, cpuSnapshot, residentMiB, type CpuReport } from './support/cpu';
import { finishReport, Harness, infrastructureOf, percentText, quietestOf, TargetStartError } from './support/harness';
import type { BrokerSettle } from './support/jit';
import { runLoad, stopLoad } from './support/load';
import { BenchOptions, optionsOrExit, USAGE } from './support/options';
import {
  BenchReport,
  brokerMs,
  compare,
  cpuMsText,
  flagsOf,
  foreignCpu,
  gitInfo,
  machineInfo,
  markdownReport,
  markdownTable,
  noiseWarnings,
  perUnitText,
  TargetResult,
} from './support/report';
import { DISTRIBUTED_READ_STAGES, pauseLines, pausesOf, scrapeAll, stageLines, stageResults } from './support/stages';
import { PreparedTarget, startTarget, TargetContext } from './support/targets';

const harness = new Harness('bench');
const { log, cleanup } = harness;
harness.whenInterrupted(stopLoad);

/** One warm-up and one measured run at `connections`, with the CPU use of the measured part. */
async function measureOnce(target: PreparedTarget, options: BenchOptions, connections: number, cores: number) {
  const label = `${target.name} (${connections} conn.)`;
  const settings = {
    origin: target.origin,
    requests: target.requests,
    connections,
    pipelining: options.pipelining,
    rate: options.rate,
    timeoutSeconds: options.timeoutSeconds,
  };
  if (options.waitQuietSeconds > 0) await harness.waitQuiet(target, options.waitQuietSeconds, cores);
  log(`${label}: warming up for ${options.warmupSeconds} s`);
  const warmup = await runLoad({ ...settings, durationSeconds: Math.max(1, Math.ceil(options.warmupSeconds)) });
  harness.checkInterrupted();
  log(`${label}: warm-up ${warmup.requestsPerSecond.mean} req/s; measuring for ${options.durationSeconds} s`);
  const metricsBefore = target.metricsUrls ? await scrapeAll(target.metricsUrls) : undefined;
  const before = cpuSnapshot();
  const measured = await runLoad({ ...settings, durationSeconds: options.durationSeconds });
  const cpu = cpuBetween(before, cpuSnapshot(), target.servers, cores, target.databaseName);
  const metricsAfter = target.metricsUrls && metricsBefore ? await scrapeAll(target.metricsUrls) : undefined;
  const stages = metricsBefore && metricsAfter ? stageResults(DISTRIBUTED_READ_STAGES, metricsBefore, metricsAfter) : undefined;
  const pauses = metricsBefore && metricsAfter ? pausesOf(metricsBefore, metricsAfter) : undefined;
  // Read at the end of the measured run, while the servers still hold what the load made them allocate.
  const rssMiB = residentMiB(target.servers);
  harness.checkInterrupted();
  const cpuMsPerRequest = cpuMsPer(cpu, measured.ok);
  const flags = flagsOf(measured);
  if (warmup.non2xx + warmup.errors + warmup.mismatches > 0) {
    flags.push(`warm-up had ${warmup.non2xx} non-2xx, ${warmup.errors} errors, ${warmup.mismatches} mismatches`);
  }
  const broker = brokerMs(cpuMsPerRequest);
  log(
    `${label}: ${measured.requestsPerSecond.mean} req/s, p50 ${measured.latencyMs.p50} ms, p99 ${measured.latencyMs.p99} ms` +
      (broker === undefined ? '' : `, broker ${cpuMsText(broker)} CPU ms/req`) +
      (measured.pacing
        ? `, offered ${measured.pacing.offeredPerSecond} req/s, sent ${measured.pacing.sendLagMs.p50} ms after due (p50; p99 ${measured.pacing.sendLagMs.p99})`
        : '') +
      (flags.length > 0 ? ` — FLAGGED: ${flags.join('; ')}` : ''),
  );
  if (cpu) {
    log(
      `${label}: cpu client ${cpu.client}%, ${percentText(cpu.servers)}${Object.keys(cpu.others).length ? `, others: ${percentText(cpu.others)}` : ''}; machine ${cpu.machineBusy}% of ${cpu.machineCapacity}%`,
    );
    log(`${label}: CPU ms per request: ${perUnitText(cpuMsPerRequest)}`);
  }
  if (rssMiB) log(`${label}: resident memory MiB (each process itself): ${perUnitText(rssMiB)}`);
  for (const line of [...stageLines(stages ?? []), ...pauseLines(pauses ?? [])]) log(`${label}: ${line}`);
  const unread = Object.keys(target.metricsUrls ?? {}).filter((process) => metricsBefore?.[process] === undefined || metricsAfter?.[process] === undefined);
  if (unread.length > 0) log(`${label}: metrics not read before and after the run from ${unread.join(', ')}: their stages and pauses left out`);
  const warnings = noiseWarnings(cpu, infrastructureOf(target));
  for (const warning of warnings) log(`${label}: warning: ${warning}`);
  return { warmup, measured, cpu, cpuMsPerRequest, rssMiB, stages, pauses, flags, warnings, foreign: foreignCpu(cpu, infrastructureOf(target)).total };
}

async function measure(
  target: PreparedTarget,
  options: BenchOptions,
  connections: number,
  cores: number,
  idleCpu: CpuReport | null,
  brokerSettle: BrokerSettle | null,
): Promise<TargetResult> {
  const run = await quietestOf(harness, `${target.name} (${connections} conn.)`, options.waitQuietSeconds, () => measureOnce(target, options, connections, cores));
  const { warmup, measured, cpu, cpuMsPerRequest, rssMiB, stages, pauses, flags, warnings } = run;
  const { durationSeconds, responses, non2xx, errors, mismatches, requestsPerSecond } = warmup;
  return {
    name: target.name,
    connections,
    description: target.description,
    origin: target.origin,
    paths: target.requests.map((request) => request.path),
    startupSeconds: Math.round(target.startupSeconds * 10) / 10,
    details: target.details,
    bodyBytes: Buffer.byteLength(target.requests[0]?.body ?? ''),
    responseBody: target.requests[0]?.body ?? '',
    warmup: { durationSeconds, responses, non2xx, errors, mismatches, requestsPerSecond },
    brokerSettle,
    measured,
    cpu,
    idleCpu,
    cpuMsPerRequest,
    rssMiB,
    ...(stages ? { stages } : {}),
    ...(pauses ? { pauses } : {}),
    uncleanExits: [],
    flags,
    warnings,
  };
}

async function main(): Promise<number> {
  const options = optionsOrExit('http', USAGE);
  if (typeof options === 'number') return options;
  const startedAt = new Date();
  const machine = machineInfo();
  const context: TargetContext = { cleanup, log, tenants: options.tenants, serverEnv: harness.serverEnv(options) };
  log(
    `${options.mode} run: ${options.targets.join(', ')}; ${options.warmupSeconds} s warm-up + ${options.durationSeconds} s measured at ` +
      `${options.connections.join(' and ')} connection(s), pipelining ${options.pipelining}, ${options.tenants} tenant(s)${options.rate ? `, offered ${options.rate} req/s` : ''}; ${machine.cpus} cpus, node ${machine.node}`,
  );

  const results: TargetResult[] = [];
  let missionBody: string | undefined;
  for (const name of options.targets) {
    log(`${name}: starting`);
    let target: PreparedTarget;
    try {
      target = await startTarget(name, context, missionBody);
    } catch (error) {
      harness.checkInterrupted();
      throw new TargetStartError(`The ${name} target could not start: ${error instanceof Error ? error.message : String(error)}`);
    }
    if (name === 'embedded' || name === 'distributed') missionBody ??= target.requests[0]?.body;
    harness.checkInterrupted();
    log(`${target.name}: up after ${target.startupSeconds.toFixed(1)} s`);
    const brokerSettle = await harness.settleBroker(target, options.settleSeconds, Math.max(...options.connections));
    // At rest after that warm-up, as a broker in service is.
    const idleCpu = await harness.idleCpu(target, machine.cpus);
    // Most connections first: the runs with fewer connections then find servers (and broker) warmed by the heavier load.
    const measured: TargetResult[] = [];
    for (const connections of [...options.connections].reverse()) {
      measured.push(await measure(target, options, connections, machine.cpus, idleCpu, brokerSettle));
      harness.checkInterrupted();
    }
    log(`${name}: stopping`);
    const unclean = await target.stop();
    for (const result of measured) results.push({ ...result, uncleanExits: unclean });
    if (unclean.length > 0) log(`${name}: not every process exited cleanly: ${unclean.join(', ')}`);
  }

  compare(results);
  const report: BenchReport = {
    schema: 2,
    date: startedAt.toISOString().slice(0, 10),
    startedAt: startedAt.toISOString(),
    finishedAt: new Date().toISOString(),
    git: gitInfo(),
    machine,
    parameters: {
      mode: options.mode,
      warmupSeconds: options.warmupSeconds,
      settleSeconds: options.settleSeconds,
      durationSeconds: options.durationSeconds,
      connections: options.connections,
      pipelining: options.pipelining,
      tenants: options.tenants,
      offeredRate: options.rate ?? null,
      timeoutSeconds: options.timeoutSeconds,
      request: 'GET /api/missions/:id',
      client:
        options.rate === undefined
          ? 'autocannon, closed loop (in the benchmark process; servers in their own processes)'
          : 'undici, paced open loop, latency from when each request was due (in the benchmark process; servers in their own processes)',
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
    report.date,
    report,
    markdownReport(report),
    markdownTable(results),
    'at least one run had non-2xx responses, errors or mismatched bodies (see above)',
    log,
  );
}

harness.run(main);
