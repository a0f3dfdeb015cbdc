import pino, { Logger } from 'pino';
import { currentRequestId, currentTraceId, optionalTenant } from '@mission/tenant-context';

export type { Logger } from 'pino';

/** The HTTP request, tenant and trace a log line was written in, when there are any. */
function contextFields(): Record<string, string> {
  const requestId = currentRequestId();
  const tenantId = optionalTenant()?.tenantId;
  const traceId = currentTraceId();
  return { ...(requestId ? { requestId } : {}), ...(tenantId ? { tenantId } : {}), ...(traceId ? { traceId } : {}) };
}

/** Fields never logged, wherever in a logged object they appear (one level down too). */
const REDACTED = [
  'authorization',
  'cookie',
  'set-cookie',
  'password',
  'clientSecret',
  'client_secret',
  'token',
  'access_token',
  'refresh_token',
  'id_token',
  'KEK',
  'KEK_PREVIOUS',
  'BRAIN_INDEX_KEY',
  'IDP_KEY_ENCRYPTION_KEY',
  'ADMIN_CLIENT_SECRET',
];

/** Structured JSON logs carrying the tenant and trace; credentials never reach them, whatever a caller passes. */
export function createLogger(name: string, level: string = process.env.LOG_LEVEL ?? 'info'): Logger {
  return pino({
    name,
    level,
    base: { service: name },
    mixin: contextFields,
    redact: {
      paths: [...REDACTED.flatMap((field) => [`["${field}"]`, `*["${field}"]`]), 'req.headers.authorization', 'req.headers.cookie'],
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
