import type { Logger } from 'pino';
import { stopTracing } from './tracing/tracing';

/**
 * Runs `stop` once on SIGTERM or SIGINT, flushes traces, then exits. A second signal, or a stop that takes longer
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
      // Spans still buffered go out last: they include the ones of the shutdown itself.
      .then(() => stopTracing().catch((error: unknown) => logger.warn({ err: error }, 'Flushing traces failed')))
      .then(() => process.exit(0))
      .catch((error: unknown) => {
        logger.error({ err: error }, 'Shutdown failed');
        process.exit(1);
      });
  };
  process.once('SIGTERM', handler);
  process.once('SIGINT', handler);
}
