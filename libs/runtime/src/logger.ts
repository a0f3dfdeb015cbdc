import pino, { Logger } from 'pino';
import { prettyFactory } from 'pino-pretty';
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

/**
 * How log lines are written: `json` (one object per line, for collectors) or `pretty` (readable,
 * coloured, for a person at a terminal). LOG_FORMAT chooses; unset, a terminal gets `pretty` and
 * anything else (a pipe, a file, a container's log) `json`.
 */
export function logFormat(env: NodeJS.ProcessEnv = process.env, stdoutIsTerminal: boolean = process.stdout.isTTY === true): 'json' | 'pretty' {
  const chosen = env.LOG_FORMAT?.trim().toLowerCase();
  if (chosen === 'json' || chosen === 'pretty') return chosen;
  return stdoutIsTerminal ? 'pretty' : 'json';
}

/**
 * Structured logs carrying the tenant and trace; credentials never reach them, whatever a caller
 * passes. Written to standard output (`destination`: elsewhere, one call per line).
 */
export function createLogger(
  name: string,
  level: string = process.env.LOG_LEVEL ?? 'info',
  format: 'json' | 'pretty' = logFormat(),
  destination?: { write(line: string): void },
): Logger {
  const options = {
    name,
    level,
    base: { service: name },
    mixin: contextFields,
    redact: {
      paths: [...REDACTED.flatMap((field) => [`["${field}"]`, `*["${field}"]`]), 'req.headers.authorization', 'req.headers.cookie'],
      censor: '[redacted]',
    },
  };
  if (format === 'json') return destination ? pino(options, destination) : pino(options);
  // Formatted and written in the same call, in this process: lines keep their order with the
  // process's own output (the ready block), and nothing is lost at exit.
  const prettify = prettyFactory({ colorize: process.stdout.hasColors?.() ?? false, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname,service', singleLine: true });
  const out = destination ?? process.stdout;
  return pino(options, { write: (line: string) => void out.write(prettify(line)) });
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
