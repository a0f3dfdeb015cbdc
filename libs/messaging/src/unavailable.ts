/**
 * Whether an error a handler threw means that something it depends on is unavailable for now
 * (a network peer or the database is down, restarting or full), as opposed to a bug or a bad
 * request. Such a failure is answered `dependency_unavailable` (503 with Retry-After at the
 * gateway): retrying later can succeed. Recognised by the codes Node, node-postgres and
 * PostgreSQL give them, also when wrapped (TypeORM's QueryFailedError keeps `driverError`).
 */
const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);

/**
 * SQLSTATE: the connection exceptions that mean the server went away or refused us (not 08P01,
 * a protocol violation: a bug such as a wrong number of parameters); 57P01–57P03 shutdowns and
 * "cannot connect now"; 53300 too many connections.
 */
const SQLSTATE_UNAVAILABLE = new Set(['08000', '08001', '08003', '08004', '08006', '57P01', '57P02', '57P03', '53300']);

/** node-postgres raises these as plain errors (no code) when the pool cannot get, or loses, a connection. */
const DRIVER_MESSAGES =
  /^(timeout exceeded when trying to connect|Connection terminated( unexpectedly| due to connection timeout)?|Client has encountered a connection error and is not queryable)$/i;

export function isDependencyUnavailable(error: unknown, depth = 0): boolean {
  if (typeof error !== 'object' || error === null || depth > 3) return false;
  const { code, message, driverError, cause } = error as { code?: unknown; message?: unknown; driverError?: unknown; cause?: unknown };
  if (typeof code === 'string') return NETWORK_CODES.has(code) || SQLSTATE_UNAVAILABLE.has(code);
  // Only an error without a code can be one of the driver's connection messages, and only whole.
  if (typeof message === 'string' && DRIVER_MESSAGES.test(message)) return true;
  return isDependencyUnavailable(driverError, depth + 1) || isDependencyUnavailable(cause, depth + 1);
}
