import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createTestDatabase, freePort, TestDatabase } from '@mission/persistence';
import { RunningProcess, startProcess, waitUntilReady } from './processes';
import { testSigningKeyEnv } from './test-signing-key';
import { KafkaAccess, kafkaEnvFor } from './kafka-access';
import { SCENARIO_WEBHOOK_ENV } from './scenarios/webhooks';

export type AppName = 'idp' | 'mission-service' | 'brain-service' | 'hit-service' | 'notification-service' | 'gateway';

/** How a restarted app's old process ended: its exit code or the signal that ended it, and how long after the signal. */
export interface StoppedApp {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stoppedInMs: number;
}

export interface DistributedStack {
  readonly gatewayUrl: string;
  readonly issuer: string;
  readonly admin: { readonly clientId: string; readonly clientSecret: string };
  readonly database: TestDatabase;
  /** The payload key-encryption key every app was given (a test that talks to Kafka itself needs it). */
  readonly kek: string;
  /** Where an app serves /metrics and /health with details: its operations port (a service's health port). */
  opsUrl(name: AppName): string;
  /** The running process of an app (replaced by restart()). */
  process(name: AppName): RunningProcess;
  /**
   * Stops an app (SIGTERM, or SIGKILL for a crash), runs `whileStopped` while it is down, and
   * starts it again with the same environment. Fails unless the app exited as the signal asks:
   * exit code 0 after SIGTERM or SIGINT (a graceful stop), killed by the signal otherwise.
   * Resolves with how it exited and how long after the signal.
   */
  restart(name: AppName, signal?: NodeJS.Signals, whileStopped?: () => Promise<void>): Promise<StoppedApp>;
  /** Stops every app; resolves with the names of those that did not exit cleanly. */
  stop(): Promise<string[]>;
}

/**
 * The six deployables as separate processes, talking only over Kafka, on a fresh PostgreSQL
 * database: the production topology on one machine, each app signed in to the broker as its own
 * principal where the broker asks for it. `extraEnv` goes to every app (tracing, say).
 */
export async function startDistributedStack(kafka: KafkaAccess, adminPostgresUrl: string, extraEnv: Readonly<Record<string, string>> = {}): Promise<DistributedStack> {
  const database = await createTestDatabase(adminPostgresUrl);
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'mission-it-'));
  const [gatewayPort, idpPort, missionHealth, brainHealth, hitHealth, notificationHealth, gatewayOps, idpOps] = await Promise.all([
    freePort(),
    freePort(),
    freePort(),
    freePort(),
    freePort(),
    freePort(),
    freePort(),
    freePort(),
  ]);
  const gatewayUrl = `http://127.0.0.1:${gatewayPort}`;
  const issuer = `http://127.0.0.1:${idpPort}`;
  const admin = { clientId: 'operator', clientSecret: randomBytes(24).toString('base64url') };
  const kek = randomBytes(32).toString('base64url');
  const common = { HOST: '127.0.0.1', KEK: kek, ...extraEnv };

  const apps: Record<AppName, { entry: string; env: Record<string, string>; ready: string; ops: string }> = {
    idp: {
      entry: 'apps/idp/src/main.ts',
      env: {
        ...common,
        ...kafkaEnvFor(kafka, 'idp'),
        PORT: String(idpPort),
        OPS_PORT: String(idpOps),
        IDP_ISSUER: issuer,
        GATEWAY_AUDIENCE: gatewayUrl,
        DATABASE_URL: database.url,
        DATA_DIR: dataDir,
        ADMIN_CLIENT_ID: admin.clientId,
        ADMIN_CLIENT_SECRET: admin.clientSecret,
        IDP_KEY_ENCRYPTION_KEY: randomBytes(32).toString('base64url'),
        IDP_KEY_PUBLISH_DELAY_SECONDS: '2',
        ...testSigningKeyEnv(),
      },
      ready: `${issuer}/health/ready`,
      ops: `http://127.0.0.1:${idpOps}`,
    },
    'mission-service': {
      entry: 'apps/mission-service/src/main.ts',
      env: { ...common, ...kafkaEnvFor(kafka, 'mission-service'), HEALTH_PORT: String(missionHealth), DATABASE_URL: database.url },
      ready: `http://127.0.0.1:${missionHealth}/health/ready`,
      ops: `http://127.0.0.1:${missionHealth}`,
    },
    'brain-service': {
      entry: 'apps/brain-service/src/main.ts',
      env: { ...common, ...kafkaEnvFor(kafka, 'brain-service'), HEALTH_PORT: String(brainHealth), DATABASE_URL: database.url, BRAIN_INDEX_KEY: randomBytes(32).toString('base64') },
      ready: `http://127.0.0.1:${brainHealth}/health/ready`,
      ops: `http://127.0.0.1:${brainHealth}`,
    },
    'hit-service': {
      entry: 'apps/hit-service/src/main.ts',
      env: { ...common, ...kafkaEnvFor(kafka, 'hit-service'), HEALTH_PORT: String(hitHealth), DATABASE_URL: database.url },
      ready: `http://127.0.0.1:${hitHealth}/health/ready`,
      ops: `http://127.0.0.1:${hitHealth}`,
    },
    'notification-service': {
      entry: 'apps/notification-service/src/main.ts',
      // Webhook receivers of the scenarios listen on loopback, and retry quickly.
      env: { ...common, ...kafkaEnvFor(kafka, 'notification-service'), HEALTH_PORT: String(notificationHealth), DATABASE_URL: database.url, ...SCENARIO_WEBHOOK_ENV },
      ready: `http://127.0.0.1:${notificationHealth}/health/ready`,
      ops: `http://127.0.0.1:${notificationHealth}`,
    },
    gateway: {
      entry: 'apps/gateway/src/main.ts',
      env: {
        ...common,
        ...kafkaEnvFor(kafka, 'gateway'),
        PORT: String(gatewayPort),
        OPS_PORT: String(gatewayOps),
        PUBLIC_URL: gatewayUrl,
        IDP_ISSUER: issuer,
        REDIS_URL: process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379',
        // Keys rotate with a 2 s publish delay here: a new key's first tokens find it within a second.
        GATEWAY_JWKS_COOLDOWN_SECONDS: '1',
      },
      ready: `${gatewayUrl}/health/ready`,
      ops: `http://127.0.0.1:${gatewayOps}`,
    },
  };
  const names = Object.keys(apps) as AppName[];
  const running = new Map<AppName, RunningProcess>(names.map((name) => [name, startProcess(name, apps[name].entry, apps[name].env)]));

  const cleanup = async (): Promise<string[]> => {
    const codes = await Promise.all([...running.values()].map(async (child) => [child.name, await child.stop()] as const));
    await database.drop();
    await rm(dataDir, { recursive: true, force: true });
    return codes.filter(([, code]) => code !== 0).map(([name]) => name);
  };

  try {
    await Promise.all(names.map((name) => waitUntilReady(apps[name].ready, [...running.values()], 120_000)));
  } catch (error) {
    await Promise.all([...running.values()].map((child) => child.stop('SIGKILL')));
    await database.drop();
    await rm(dataDir, { recursive: true, force: true });
    throw error;
  }

  return {
    gatewayUrl,
    issuer,
    admin,
    database,
    kek,
    opsUrl: (name) => apps[name].ops,
    process: (name) => {
      const child = running.get(name);
      if (!child) throw new Error(`No process ${name}`);
      return child;
    },
    restart: async (name, signal = 'SIGTERM', whileStopped) => {
      const stopping = running.get(name);
      if (!stopping) throw new Error(`No process ${name}`);
      const signalledAt = performance.now();
      await stopping.stop(signal);
      const stoppedInMs = performance.now() - signalledAt;
      const exit = { code: stopping.child.exitCode, signal: stopping.child.signalCode };
      const graceful = signal === 'SIGTERM' || signal === 'SIGINT';
      if (graceful ? exit.code !== 0 : exit.signal !== signal) {
        throw new Error(
          `${name} did not exit as ${signal} asks (${graceful ? 'code 0' : `killed by ${signal}`}): ${JSON.stringify(exit)} after ${Math.round(stoppedInMs)} ms\n${stopping.output()}`,
        );
      }
      await whileStopped?.();
      const child = startProcess(name, apps[name].entry, apps[name].env);
      running.set(name, child);
      await waitUntilReady(apps[name].ready, [child], 120_000);
      return { ...exit, stoppedInMs };
    },
    stop: cleanup,
  };
}
