import { execFileSync } from 'node:child_process';
import path from 'node:path';

const root = path.join(__dirname, '..', '..');

function run(script: string, ...args: string[]): string {
  return execFileSync(process.execPath, [path.join(root, 'scripts', 'infra', script), ...args], {
    cwd: root,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
}

/** Ensures PostgreSQL and Redis are up and starts a fresh single-node Kafka broker for this run. */
export default async function globalSetup(): Promise<void> {
  run('services.mjs', 'ensure');
  if (!process.env.KAFKA_BROKERS) {
    const output = run('kafka.mjs', 'start', '--fresh');
    const brokers = /KAFKA_BROKERS=(\S+)/.exec(output)?.[1];
    if (!brokers) throw new Error(`Kafka did not report its address:\n${output}`);
    process.env.KAFKA_BROKERS = brokers;
    process.env.MS_TEST_STARTED_KAFKA = '1';
  }
  process.env.TEST_POSTGRES_URL ??= 'postgres://postgres@127.0.0.1:5432/postgres';
  process.env.TEST_REDIS_URL ??= 'redis://127.0.0.1:6379';
}
