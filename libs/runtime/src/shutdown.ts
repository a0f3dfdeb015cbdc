import type { Logger } from 'pino';
import { stopTracing } from './tracing/tracing';

/** What the shutdown handler needs from its process: signals, exit, a timer and the trace flush (tests pass their own). */
export interface ShutdownHost {
  on(signal: NodeJS.Signals, listener: (signal: NodeJS.Signals) => void): void;
  exit(code: number): void;
  setTimeout(callback: () => void, ms: number): { unref(): void };
  flushTraces(): Promise<void>;
}

const nodeHost: ShutdownHost = {
  on: (signal, listener) => void process.on(signal, listener),
  exit: (code) => process.exit(code),
  setTimeout: (callback, ms) => setTimeout(callback, ms),
  flushTraces: () => stopTracing(),
};

export type ShutdownLogger = Pick<Logger, 'info' | 'warn' | 'error'>;

/**
 * Runs `stop` once on SIGTERM or SIGINT, flushes traces, then exits 0 (1 when `stop` fails). A
 * second signal, or a stop that takes longer than `graceMs`, exits 1 at once.
 */
export function onShutdownSignal(logger: ShutdownLogger, stop: () => Promise<void>, graceMs = 25_000, host: ShutdownHost = nodeHost): void {
  let stopping = false;
  const handler = (signal: NodeJS.Signals): void => {
    if (stopping) {
      logger.error({ signal }, 'Second signal while shutting down; exiting');
      host.exit(1);
      return;
    }
    stopping = true;
    logger.info({ signal }, 'Shutting down');
    const timer = host.setTimeout(() => {
      logger.error('Shutdown took too long; exiting');
      host.exit(1);
    }, graceMs);
    timer.unref();
    stop()
      // Spans still buffered go out last: they include the ones of the shutdown itself.
      .then(() => host.flushTraces().catch((error: unknown) => logger.warn({ err: error }, 'Flushing traces failed')))
      .then(() => host.exit(0))
      .catch((error: unknown) => {
        logger.error({ err: error }, 'Shutdown failed');
        host.exit(1);
      });
  };
  // `on`, not `once`: a second SIGTERM must reach the handler too, not Node's default action.
  host.on('SIGTERM', handler);
  host.on('SIGINT', handler);
}

/** After this long a shutdown step says it is still running. */
export const SLOW_STOP_STEP_MS = 5_000;

/**
 * Awaits one step of a shutdown, logging "Still stopping" with its name if it takes longer than
 * SLOW_STOP_STEP_MS: a stop that runs past its grace period then names what held it.
 */
export async function stopStep(logger: Pick<ShutdownLogger, 'warn'>, name: string, work: () => Promise<void>): Promise<void> {
  const slow = setTimeout(() => logger.warn({ step: name }, 'Still stopping'), SLOW_STOP_STEP_MS);
  slow.unref();
  try {
    await work();
  } finally {
    clearTimeout(slow);
  }
}
