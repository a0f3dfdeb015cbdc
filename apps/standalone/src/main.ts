import './tracing';
import 'reflect-metadata';
import { ConfigError } from '@mission/config';
import { createLogger, logFormat, onShutdownSignal } from '@mission/runtime';
import { readyBlock } from './ready-block';
import { startStandalone } from './standalone';
import { loadStandaloneConfig } from './standalone.config';

async function main(): Promise<void> {
  const startedAt = performance.now();
  const config = loadStandaloneConfig();
  const logger = createLogger('mission-service', config.LOG_LEVEL);
  const handle = await startStandalone(config, logger);
  const startupMs = Math.round(performance.now() - startedAt);
  logger.info({ startupMs, api: handle.gatewayUrl, issuer: handle.issuer, operations: handle.opsUrl, dataDir: handle.dataDir }, 'Ready');
  // JSON lines stay JSON for collectors; a person at a terminal gets the block.
  if (logFormat() === 'pretty') process.stdout.write(`${readyBlock(handle, startupMs)}\n`);
  onShutdownSignal(logger, async () => {
    const stopping = performance.now();
    await handle.stop();
    logger.info({ stopMs: Math.round(performance.now() - stopping) }, 'Mission Service stopped');
  });
}

main().catch((error: unknown) => {
  if (error instanceof ConfigError) {
    process.stderr.write(`${error.message}\n`);
  } else {
    process.stderr.write(`Mission Service failed to start: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  }
  process.exit(1);
});
