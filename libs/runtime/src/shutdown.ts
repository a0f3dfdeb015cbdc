import type { Logger } from 'pino';

/**
 * Runs `stop` once on SIGTERM or SIGINT, then exits. A second signal, or a stop that takes longer
 * than `graceMs`, exits at once.
 */
export function onShutdownSignal(logger: Logger, stop: () => Promise<void>, graceMs = 25_000): void {
  let stopping = false;
  const handler = (signal: NodeJS.Signals): void => {
    if (stopping) process.exit(1);
    stopping = true;
    logger.info({ signal }, 'Shutting down');
    const timer = setTimeout(() => {
      logger.error('Shutdown took too long; exiting');
      process.exit(1);
    }, graceMs);
    timer.unref();
    stop()
      .then(() => process.exit(0))
      .catch((error: unknown) => {
        logger.error({ err: error }, 'Shutdown failed');
        process.exit(1);
      });
  };
  process.once('SIGTERM', handler);
  process.once('SIGINT', handler);
}
