import { execFileSync } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { kafkaAccessFromStart, setUpKafkaAsAdmin } from '../support/kafka-access';

const root = path.join(__dirname, '..', '..');

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no free port'))));
    });
  });
}

function run(script: string, ...args: string[]): string {
  return execFileSync(process.execPath, [path.join(root, 'scripts', 'infra', script), ...args], {
    cwd: root,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
}

/** Ensures PostgreSQL, Redis, Chromium and the MCP Inspector are there and starts a fresh single-node Kafka broker for this run. */
export default async function globalSetup(): Promise<void> {
  run('services.mjs', 'ensure');
  // The sign-in test drives Debian's Chromium; installed here (apt-get) when missing.
  run('chromium.mjs', 'ensure');
  // The approvals console the gateways serve, as `npm start` builds it (only when its sources changed).
  execFileSync(process.execPath, [path.join(root, 'tools', 'console', 'build.mjs'), '--if-stale'], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });
  // The MCP Inspector's CLI, a pinned version installed once into a cache (not a project dependency).
  const inspector = /MCP_INSPECTOR=(\S+)/.exec(run('mcp-inspector.mjs', 'ensure'))?.[1];
  if (!inspector) throw new Error('The MCP Inspector did not report its executable');
  process.env.MCP_INSPECTOR = inspector;
  if (!process.env.KAFKA_BROKERS) {
    // A broker of this run's own (ports and state directory), so that two runs on one machine
    // never restart or stop each other's broker.
    process.env.KAFKA_PORT ??= String(await freePort());
    process.env.KAFKA_CONTROLLER_PORT ??= String(await freePort());
    process.env.KAFKA_STATE_DIR ??= path.join(root, '.data', `kafka-run-${process.pid}`);
    // It authenticates every client and authorizes each by the platform's ACLs, set up below as a
    // deployment's setup job does: the suites run against the authorizer production runs with.
    const access = kafkaAccessFromStart(run('kafka.mjs', 'start', '--fresh'));
    process.env.KAFKA_BROKERS = access.brokers;
    process.env.MS_TEST_STARTED_KAFKA = '1';
    if (access.mechanism && access.credentialsDir) {
      process.env.KAFKA_SASL_MECHANISM = access.mechanism;
      process.env.KAFKA_CREDENTIALS_DIR = access.credentialsDir;
      await setUpKafkaAsAdmin(access);
    }
  }
  process.env.TEST_POSTGRES_URL ??= 'postgres://postgres@127.0.0.1:5432/postgres';
  process.env.TEST_REDIS_URL ??= 'redis://127.0.0.1:6379';
}
