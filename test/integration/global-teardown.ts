import { execFileSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import path from 'node:path';

/** Stops the Kafka broker the global setup started and removes its state (a broker that was already running stays). */
export default async function globalTeardown(): Promise<void> {
  if (process.env.MS_TEST_STARTED_KAFKA !== '1' || process.env.KEEP_KAFKA === '1') return;
  const root = path.join(__dirname, '..', '..');
  execFileSync(process.execPath, [path.join(root, 'scripts', 'infra', 'kafka.mjs'), 'stop'], { cwd: root, stdio: 'inherit' });
  const stateDir = process.env.KAFKA_STATE_DIR;
  if (stateDir && path.basename(stateDir).startsWith('kafka-run-')) rmSync(stateDir, { recursive: true, force: true });
}
