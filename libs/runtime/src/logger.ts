import pino, { Logger } from 'pino';
import { currentTraceId, optionalTenant } from '@mission/tenant-context';

export type { Logger } from 'pino';

/** The tenant and trace a log line was written in, when there are any. */
function contextFields(): Record<string, string> {
  const tenantId = optionalTenant()?.tenantId;
  const traceId = currentTraceId();
  return { ...(tenantId ? { tenantId } : {}), ...(traceId ? { traceId } : {}) };
}

/** Structured JSON logs carrying the tenant and trace; credentials never reach them, whatever a caller passes. */
export function createLogger(name: string, level: string = process.env.LOG_LEVEL ?? 'info'): Logger {
  return pino({
    name,
    level,
    base: { service: name },
    mixin: contextFields,
    redact: {
      paths: ['authorization', '*.authorization', 'headers.authorization', 'req.headers.authorization', 'clientSecret', '*.clientSecret', 'password', '*.password', 'client_secret'],
      censor: '[redacted]',
    },
  });
}

/** Adapts a pino logger to the (message, context) shape the libraries log with. */
export function contextLogger(logger: Logger): {
  info(message: string, context?: Record<string, unknown>): void;
  warn(message: string, context?: Record<string, unknown>): void;
  error(message: string, context?: Record<string, unknown>): void;
} {
  return {
    info: (message, context) => logger.info(context ?? {}, message),
    warn: (message, context) => logger.warn(context ?? {}, message),
    error: (message, context) => logger.error(context ?? {}, message),
  };
}
