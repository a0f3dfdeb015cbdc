import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { MAX_ENTERPRISE_RPM } from '@mission/contracts';
import { freePort } from '@mission/persistence';
import { call, clientCredentialsToken, waitForMission } from '../../test/support/api-client';
import { AppName, DistributedStack, startDistributedStack } from '../../test/support/distributed-stack';
import { Cleanup } from './cleanup';
import type { LoadRequest } from './load';
import type { TargetName } from './options';
import { REPO_ROOT, ServerProcess, startServer, waitUntilReady } from './processes';
import { KafkaAccess, kafkaAccessFromEnv, kafkaAccessFromStart, kafkaEnvFor, setUpKafkaAsAdmin } from '../../test/support/kafka-access';

/** A target that is up, with everything needed to load it. */
export interface PreparedTarget {
  readonly name: TargetName;
  readonly description: string;
  /** http://host:port of the target. */
  readonly origin: string;
  /** The requests under load (one per tenant), each with the exact body its response must carry. */
  readonly requests: readonly LoadRequest[];
  /** The first tenant's bearer token (enterprise, at the highest rpm), for suites that drive the API further; none for the baseline. */
  readonly token?: string;
  /** Server processes (and a Kafka broker started for the run) by name; descendants count with them in the CPU figures. */
  readonly servers: Record<string, number>;
  /** The database the target uses on the system PostgreSQL (its backends count as the target's). */
  readonly databaseName?: string;
  readonly startupSeconds: number;
  readonly details: Record<string, unknown>;
  /** Where each of its processes serves Prometheus metrics, for the stages of a read (support/stages.ts); none for targets without. */
  readonly metricsUrls?: Readonly<Record<string, string>>;
  /** Stops the target and removes what it created; resolves with the processes that did not exit cleanly. */
  stop(): Promise<string[]>;
}

export interface TargetContext {
  readonly cleanup: Cleanup;
  readonly log: (message: string) => void;
  readonly tenants: number;
  /** Extra environment of every server process (the CPU profiler preload). */
  readonly serverEnv: Record<string, string>;
}

const READY_TIMEOUT_MS = 180_000;

/** The name of a Kafka broker the benchmark started, among a target's servers (in the CPU figures). */
export const KAFKA_BROKER = 'kafka broker';
const MISSION = { title: 'Benchmark mission', objective: 'What do we know about microwave dielectrics?' };

/**
 * Variables the benchmark's own environment may hold that would rewire the all-in-one process:
 * blank, as in the end-to-end suite, so that it runs on its embedded defaults (`npm start`).
 */
const WIRING_VARIABLES = ['DATABASE_URL', 'KAFKA_BROKERS', 'REDIS_URL', 'ADMIN_CLIENT_ID', 'ADMIN_CLIENT_SECRET', 'PUBLIC_URL', 'IDP_ISSUER'];

function embeddedDefaults(): Record<string, string> {
  return Object.fromEntries(WIRING_VARIABLES.map((name) => [name, '']));
}

async function distinctFreePorts(count: number): Promise<number[]> {
  const ports = new Set<number>();
  while (ports.size < count) ports.add(await freePort());
  return [...ports];
}

/**
 * What a client does before it can read a mission: an operator token, a tenant with its machine
 * client (enterprise, at the highest rpm a tenant can have), a tenant token, a mission submitted
 * and awaited until `succeeded`. Returns the request under load and the body it answers (checked
 * to be stable: it is compared with every response).
 */
async function prepareMission(gatewayUrl: string, issuer: string, adminToken: string, index: number) {
  const tenant = await call(gatewayUrl, 'POST', '/admin/tenants', {
    token: adminToken,
    body: { name: `Benchmark tenant ${index + 1}`, tier: 'enterprise', rpm: MAX_ENTERPRISE_RPM },
  });
  if (tenant.status !== 201) throw new Error(`Creating the tenant answered ${tenant.status}: ${JSON.stringify(tenant.body)}`);
  const { clientId, clientSecret } = tenant.body.client as { clientId: string; clientSecret: string };
  const token = (await clientCredentialsToken(issuer, clientId, clientSecret)).access_token;
  const submitted = await call(gatewayUrl, 'POST', '/api/missions', { token, body: MISSION });
  if (submitted.status !== 202) throw new Error(`Submitting the mission answered ${submitted.status}: ${JSON.stringify(submitted.body)}`);
  const missionId = submitted.body.id as string;
  const final = await waitForMission(gatewayUrl, token, missionId, 60_000);
  if (final.status !== 'succeeded') throw new Error(`The mission ended ${final.status}, not succeeded: ${JSON.stringify(final)}`);

  const requestPath = `/api/missions/${missionId}`;
  const url = `${gatewayUrl}${requestPath}`;
  const headers = { authorization: `Bearer ${token}` };
  const bodies: string[] = [];
  for (let i = 0; i < 2; i++) {
    const response = await fetch(url, { headers });
    const text = await response.text();
    if (response.status !== 200) throw new Error(`GET ${url} answered ${response.status}: ${text}`);
    bodies.push(text);
  }
  if (bodies[0] !== bodies[1]) throw new Error(`GET ${url} answers a different body each time; it cannot be checked:\n${bodies.join('\n')}`);
  return { path: requestPath, headers, body: bodies[0] ?? '', missionId, tenantId: tenant.body.id as string, token };
}

/** `count` tenants, each with a finished mission: the requests under load and what they read. */
async function prepareMissions(gatewayUrl: string, issuer: string, admin: { clientId: string; clientSecret: string }, count: number) {
  const adminToken = (await clientCredentialsToken(issuer, admin.clientId, admin.clientSecret)).access_token;
  const missions = [];
  for (let index = 0; index < count; index++) missions.push(await prepareMission(gatewayUrl, issuer, adminToken, index));
  return {
    requests: missions.map(({ path: requestPath, headers, body }) => ({ path: requestPath, headers, body })),
    token: missions[0]?.token,
    details: { tenants: missions.map(({ tenantId, missionId }) => ({ tenantId, missionId })) },
  };
}

/** Stops the servers; resolves with the names of those that did not exit cleanly. */
async function stopAll(servers: readonly ServerProcess[]): Promise<string[]> {
  const codes = await Promise.all(servers.map(async (server) => [server.name, await server.stop()] as const));
  return codes.filter(([, code]) => code !== 0).map(([name]) => name);
}

/** Kills a PostgreSQL left running in `databaseDir` (only if its owner died without stopping it). */
async function killOrphanPostgres(databaseDir: string, log: (message: string) => void): Promise<void> {
  const pidFile = path.join(databaseDir, 'postmaster.pid');
  if (!existsSync(pidFile)) return;
  const pid = Number((await readFile(pidFile, 'utf8')).split('\n')[0]);
  if (!Number.isInteger(pid) || pid <= 0) return;
  try {
    process.kill(pid, 'SIGQUIT');
  } catch {
    return; // not running
  }
  log(`stopped an orphaned embedded PostgreSQL (pid ${pid})`);
  for (let i = 0; i < 50; i++) {
    try {
      process.kill(pid, 0);
    } catch {
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  process.kill(pid, 'SIGKILL');
}

/** (a) apps/standalone: every service in one process, embedded PostgreSQL, in-process bus. */
export async function startEmbedded(context: TargetContext): Promise<PreparedTarget> {
  const started = performance.now();
  const { cleanup, log } = context;
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'mission-bench-embedded-'));
  const removeDataDir = cleanup.add('embedded data dir', async () => {
    await killOrphanPostgres(path.join(dataDir, 'postgres'), log);
    await rm(dataDir, { recursive: true, force: true });
  });
  const [port, idpPort, opsPort] = await distinctFreePorts(3);
  const gatewayUrl = `http://127.0.0.1:${port}`;
  const server = startServer('standalone', 'apps/standalone/src/main.ts', {
    ...context.serverEnv,
    ...embeddedDefaults(),
    HOST: '127.0.0.1',
    PORT: String(port),
    IDP_PORT: String(idpPort),
    OPS_PORT: String(opsPort),
    DATA_DIR: dataDir,
  });
  let unclean: string[] = [];
  const stopServer = cleanup.add('embedded server', async () => {
    unclean = await stopAll([server]);
  });
  await waitUntilReady(`${gatewayUrl}/health/ready`, [server], READY_TIMEOUT_MS);
  const admin = JSON.parse(await readFile(path.join(dataDir, 'admin-client.json'), 'utf8')) as { clientId: string; clientSecret: string };
  const missions = await prepareMissions(gatewayUrl, `http://127.0.0.1:${idpPort}`, admin, context.tenants);
  return {
    name: 'embedded',
    description: 'apps/standalone: gateway, idp and services in one process, embedded PostgreSQL, in-process bus',
    origin: gatewayUrl,
    requests: missions.requests,
    token: missions.token,
    servers: { standalone: server.pid },
    startupSeconds: (performance.now() - started) / 1000,
    details: missions.details,
    stop: async () => {
      await stopServer();
      await removeDataDir();
      return unclean;
    },
  };
}

/** Runs one of scripts/infra/*.mjs; its progress goes to our stderr, its stdout is returned. */
function runScript(script: string, args: string[], env: Record<string, string>, options: { detached?: boolean } = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(REPO_ROOT, 'scripts', 'infra', script), ...args], {
      cwd: REPO_ROOT,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'inherit'],
      // Detached: Ctrl-C does not interrupt it half-way; the clean-up waits for it instead.
      detached: options.detached ?? false,
    });
    let stdout = '';
    child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve(stdout) : reject(new Error(`${script} ${args.join(' ')} exited with ${code}:\n${stdout}`))));
  });
}

/**
 * A Kafka broker of our own for this run: fresh state in a temp dir, on free ports, so that a
 * broker someone else runs (on the default 127.0.0.1:19092 and ./.data/kafka) is never touched.
 */
async function startKafka(context: TargetContext): Promise<{ access: KafkaAccess; pid: number; stop: () => Promise<void> }> {
  const base = await mkdtemp(path.join(os.tmpdir(), 'mission-bench-kafka-'));
  const [port, controllerPort] = await distinctFreePorts(2);
  const stateDir = path.join(base, 'state');
  const env = { KAFKA_STATE_DIR: stateDir, KAFKA_PORT: String(port), KAFKA_CONTROLLER_PORT: String(controllerPort) };
  const stop = context.cleanup.add('Kafka broker', async () => {
    try {
      await runScript('kafka.mjs', ['stop'], env);
    } finally {
      await rm(base, { recursive: true, force: true });
    }
  });
  // As the integration suite runs it: SASL per service and the platform's ACLs, set up as a deployment does.
  const access = kafkaAccessFromStart(await runScript('kafka.mjs', ['start', '--fresh'], env, { detached: true }));
  if (access.credentialsDir) await setUpKafkaAsAdmin(access);
  const { pid } = JSON.parse(await readFile(path.join(stateDir, 'kafka.pid'), 'utf8')) as { pid: number };
  return { access, pid, stop };
}

/** The broker KAFKA_BROKERS names, or one started for the target (then among its servers, and stopped with it). */
async function targetBroker(context: TargetContext): Promise<{ access: KafkaAccess; kafka: string; infrastructure: Record<string, number>; stopKafka: () => Promise<void> }> {
  if (process.env.KAFKA_BROKERS) {
    const access = kafkaAccessFromEnv();
    return { access, kafka: `given by KAFKA_BROKERS (${access.brokers})`, infrastructure: {}, stopKafka: async () => undefined };
  }
  context.log('starting a Kafka broker for this run');
  const broker = await startKafka(context);
  return { access: broker.access, kafka: `started for this run (${broker.access.brokers})`, infrastructure: { [KAFKA_BROKER]: broker.pid }, stopKafka: broker.stop };
}

/**
 * (b) gateway, idp, mission-, brain-, hit- and notification-service as separate processes on Kafka and a fresh
 * database: test/support/distributed-stack.ts, exactly as the integration suite starts them.
 */
export async function startDistributed(context: TargetContext): Promise<PreparedTarget> {
  const started = performance.now();
  const { cleanup } = context;
  await runScript('services.mjs', ['ensure'], {});
  const { access, kafka, infrastructure, stopKafka } = await targetBroker(context);
  const adminUrl = process.env.BENCH_POSTGRES_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
  // The stack's processes inherit this process's environment: the profiler preload goes in for
  // the moment they are spawned.
  const saved = Object.fromEntries(Object.keys(context.serverEnv).map((name) => [name, process.env[name]]));
  Object.assign(process.env, context.serverEnv);
  let stack: DistributedStack;
  try {
    stack = await startDistributedStack(access, adminUrl);
  } finally {
    for (const [name, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  }
  let unclean: string[] = [];
  const stopStack = cleanup.add('distributed processes and database', async () => {
    unclean = await stack.stop();
  });
  const missions = await prepareMissions(stack.gatewayUrl, stack.issuer, stack.admin, context.tenants);
  const names: AppName[] = ['gateway', 'idp', 'mission-service', 'brain-service', 'hit-service', 'notification-service'];
  const databaseName = new URL(stack.database.url).pathname.slice(1);
  return {
    name: 'distributed',
    description: 'gateway, idp, mission-, brain-, hit- and notification-service as separate processes on Kafka and PostgreSQL',
    origin: stack.gatewayUrl,
    requests: missions.requests,
    token: missions.token,
    servers: { ...Object.fromEntries(names.map((name) => [name, stack.process(name).child.pid ?? -1])), ...infrastructure },
    databaseName,
    startupSeconds: (performance.now() - started) / 1000,
    details: { ...missions.details, kafka, database: databaseName },
    metricsUrls: { gateway: `${stack.opsUrl('gateway')}/metrics`, 'mission-service': `${stack.opsUrl('mission-service')}/metrics` },
    stop: async () => {
      await stopStack();
      await stopKafka();
      return unclean;
    },
  };
}

/** (c) bench/baseline: bare NestJS on Fastify, one route answering a fixed copy of the mission. */
export async function startBaseline(context: TargetContext, body: string | undefined): Promise<PreparedTarget> {
  const started = performance.now();
  const [port] = await distinctFreePorts(1);
  const env: Record<string, string> = { ...context.serverEnv, HOST: '127.0.0.1', PORT: String(port) };
  if (body !== undefined) env.BASELINE_BODY = body;
  const server = startServer('baseline', 'bench/baseline/main.ts', env);
  let unclean: string[] = [];
  const stopServer = context.cleanup.add('baseline server', async () => {
    unclean = await stopAll([server]);
  });
  const origin = `http://127.0.0.1:${port}`;
  const requestPath = '/api/missions/00000000-0000-4000-8000-000000000000';
  await waitUntilReady(`${origin}${requestPath}`, [server], READY_TIMEOUT_MS);
  const response = await fetch(`${origin}${requestPath}`);
  const text = await response.text();
  if (body !== undefined && text !== body) throw new Error(`The baseline answers another body than the mission's:\n${text}\n${body}`);
  return {
    name: 'baseline',
    description: 'bench/baseline: NestJS on Fastify, one route returning a fixed copy of the mission, no auth, no bus',
    origin,
    requests: [{ path: requestPath, headers: {}, body: text }],
    servers: { baseline: server.pid },
    startupSeconds: (performance.now() - started) / 1000,
    details: { body: body === undefined ? 'bench/baseline/mission.json' : 'the mission measured before' },
    stop: async () => {
      await stopServer();
      return unclean;
    },
  };
}

/**
 * (d) bench/kafka-floor: the Kafka path's round trip and nothing else (bench/kafka-floor/wire.ts):
 * a bare NestJS-on-Fastify route sending each request over Kafka to a responder that answers with
 * a fixed copy of the mission, on a broker set up as the distributed target's (SASL, ACLs; the
 * floor signs in as `admin`).
 */
export async function startKafkaFloor(context: TargetContext, body: string | undefined): Promise<PreparedTarget> {
  const started = performance.now();
  const { access, kafka, infrastructure, stopKafka } = await targetBroker(context);
  const floorBody = body ?? JSON.stringify(JSON.parse(await readFile(path.join(REPO_ROOT, 'bench', 'baseline', 'mission.json'), 'utf8')));
  const env = { ...context.serverEnv, ...kafkaEnvFor(access, 'admin'), FLOOR_BODY: floorBody };
  const [port] = await distinctFreePorts(1);
  const responder = startServer('floor responder', 'bench/kafka-floor/responder.ts', env);
  const front = startServer('floor front', 'bench/kafka-floor/front.ts', { ...env, HOST: '127.0.0.1', PORT: String(port) });
  let unclean: string[] = [];
  const stopServers = context.cleanup.add('kafka-floor servers', async () => {
    unclean = await stopAll([front, responder]);
  });
  const origin = `http://127.0.0.1:${port}`;
  const requestPath = '/api/missions/00000000-0000-4000-8000-000000000000';
  await waitUntilReady(`${origin}${requestPath}`, [front, responder], READY_TIMEOUT_MS);
  const text = await (await fetch(`${origin}${requestPath}`)).text();
  if (text !== floorBody) throw new Error(`The floor answers another body than the mission's:\n${text}\n${floorBody}`);
  return {
    name: 'kafka-floor',
    description:
      'bench/kafka-floor: NestJS on Fastify, one route sending each request over Kafka to a responder that answers a fixed copy of the mission; no auth, codec, encryption or database',
    origin,
    requests: [{ path: requestPath, headers: {}, body: text }],
    servers: { 'floor front': front.pid, 'floor responder': responder.pid, ...infrastructure },
    startupSeconds: (performance.now() - started) / 1000,
    details: { kafka, body: body === undefined ? 'bench/baseline/mission.json' : 'the mission measured before' },
    stop: async () => {
      await stopServers();
      await stopKafka();
      return unclean;
    },
  };
}

/** Starts one target; the baseline and the Kafka floor answer `missionBody` (a mission measured before) when given. */
export function startTarget(name: TargetName, context: TargetContext, missionBody?: string): Promise<PreparedTarget> {
  switch (name) {
    case 'embedded':
      return startEmbedded(context);
    case 'distributed':
      return startDistributed(context);
    case 'kafka-floor':
      return startKafkaFloor(context, missionBody);
    case 'baseline':
      return startBaseline(context, missionBody);
  }
}
