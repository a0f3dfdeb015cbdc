/** Error codes shared by every service; the gateway maps each to one HTTP status in one place. */
export const ErrorCode = {
  ValidationFailed: 'validation_failed',
  NotFound: 'not_found',
  Conflict: 'conflict',
  IdempotencyKeyReused: 'idempotency_key_reused',
  Unauthorized: 'unauthorized',
  InsufficientScope: 'insufficient_scope',
  /** Refused whatever the token: e.g. a browser origin that may not call the API. */
  Forbidden: 'forbidden',
  /** The HIT item names its deciders, and the caller is not one of them (or is a machine client). */
  NotAnAssignee: 'not_an_assignee',
  /** A mission's error when its approval step expired undecided with `onExpiry: "fail"`. */
  ApprovalExpired: 'approval_expired',
  PayloadTooLarge: 'payload_too_large',
  UnsupportedMediaType: 'unsupported_media_type',
  MalformedJson: 'malformed_json',
  /** Not HTTP the server can read (a bad request line, a malformed header). */
  MalformedRequest: 'malformed_request',
  /** The request line and headers together pass the server's limit. */
  HeadersTooLarge: 'headers_too_large',
  /** The request (its headers and body) did not arrive in time. */
  RequestTimeout: 'request_timeout',
  RateLimited: 'rate_limited',
  /** A position in an event log that is unknown, or older than what the log keeps. */
  CursorExpired: 'cursor_expired',
  /** The tenant's storage quota (documents or bytes in the Brain) would be exceeded. */
  QuotaExceeded: 'quota_exceeded',
  DependencyUnavailable: 'dependency_unavailable',
  Internal: 'internal_error',
} as const;
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

export interface FieldError {
  readonly field: string;
  readonly message: string;
}

export interface ErrorBody {
  readonly code: ErrorCode;
  readonly message: string;
  readonly errors?: readonly FieldError[];
}

/** A failure the caller can act on. Crosses the bus as an ErrorBody and becomes problem+json at the edge. */
export class DomainError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly errors?: readonly FieldError[],
  ) {
    super(message);
    this.name = 'DomainError';
  }

  toBody(): ErrorBody {
    return this.errors ? { code: this.code, message: this.message, errors: this.errors } : { code: this.code, message: this.message };
  }

  static fromBody(body: ErrorBody): DomainError {
    return new DomainError(body.code, body.message, body.errors);
  }

  static notFound(what: string): DomainError {
    return new DomainError(ErrorCode.NotFound, `${what} not found`);
  }
}

const KNOWN_CODES = new Set<string>(Object.values(ErrorCode));

export function isErrorBody(value: unknown): value is ErrorBody {
  if (typeof value !== 'object' || value === null) return false;
  const candidate = value as Record<string, unknown>;
  return typeof candidate.code === 'string' && KNOWN_CODES.has(candidate.code) && typeof candidate.message === 'string';
}
