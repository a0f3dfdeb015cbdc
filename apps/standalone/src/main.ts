import './tracing';
import 'reflect-metadata';
import { ConfigError } from '@mission/config';
import { createLogger, onShutdownSignal } from '@mission/runtime';
import { startStandalone } from './standalone';
import { loadStandaloneConfig } from './standalone.config';

async function main(): Promise<void> {
  const startedAt = performance.now();
  const config = loadStandaloneConfig();
  const logger = createLogger('mission-service', config.LOG_LEVEL);
  const handle = await startStandalone(config, logger);
  logger.info({ startupMs: Math.round(performance.now() - startedAt) }, 'Ready');
  onShutdownSignal(logger, () => handle.stop());
}

main().catch((error: unknown) => {
  if (error instanceof ConfigError) {
    process.stderr.write(`${error.message}\n`);
  } else {
    process.stderr.write(`Mission Service failed to start: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  }
  process.exit(1);
});
