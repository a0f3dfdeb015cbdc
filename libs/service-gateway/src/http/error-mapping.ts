import { HttpException } from '@nestjs/common';
import { DomainError, ErrorCode, FieldError } from '@mission/contracts';
import { isDependencyUnavailable } from '@mission/messaging';
import { HttpProblemError } from './http-problem.error';
import { DEPENDENCY_RETRY_AFTER_SECONDS } from './problem';

export interface MappedError {
  readonly code: ErrorCode;
  readonly detail: string;
  readonly errors?: readonly FieldError[];
  readonly headers: Readonly<Record<string, string>>;
  /** Unexpected: log it with its stack; the client only sees a generic 500. */
  readonly unexpected: boolean;
  /** What happened, for the log only: a 503's own message names internal parts (topics, message types). */
  readonly internalDetail?: string;
}

/** What a client is told of any 503: which part is down, and how it was reached, stays in the log. */
export const UNAVAILABLE_DETAIL = 'A service this request needs is temporarily unavailable; retry after the Retry-After delay';

/** Errors raised by the HTTP stack itself (Nest hands Fastify's, e.g. 413 and 415, over as HttpException). */
const STATUS_CODES: Readonly<Record<number, ErrorCode>> = {
  400: ErrorCode.ValidationFailed,
  401: ErrorCode.Unauthorized,
  403: ErrorCode.InsufficientScope,
  404: ErrorCode.NotFound,
  405: ErrorCode.NotFound,
  409: ErrorCode.Conflict,
  413: ErrorCode.PayloadTooLarge,
  415: ErrorCode.UnsupportedMediaType,
  429: ErrorCode.RateLimited,
  503: ErrorCode.DependencyUnavailable,
};

function withRetryAfter(code: ErrorCode, headers: Readonly<Record<string, string>>): Readonly<Record<string, string>> {
  return code === ErrorCode.DependencyUnavailable && !headers['Retry-After'] ? { ...headers, 'Retry-After': String(DEPENDENCY_RETRY_AFTER_SECONDS) } : headers;
}

/** Turns anything thrown while serving a request into what the client may see. */
export function mapError(error: unknown): MappedError {
  if (error instanceof DomainError) {
    const headers = error instanceof HttpProblemError ? error.headers : {};
    const internal = error.code === ErrorCode.Internal;
    const unavailable = error.code === ErrorCode.DependencyUnavailable;
    return {
      code: error.code,
      detail: internal ? 'An unexpected error occurred' : unavailable ? UNAVAILABLE_DETAIL : error.message,
      errors: error.errors,
      headers: withRetryAfter(error.code, headers),
      unexpected: false,
      ...(unavailable ? { internalDetail: error.message } : {}),
    };
  }
  const status = error instanceof HttpException ? error.getStatus() : (error as { statusCode?: unknown })?.statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500 && STATUS_CODES[status]) {
    const code = STATUS_CODES[status];
    const detail = code === ErrorCode.NotFound ? 'No such resource' : error instanceof Error ? error.message : 'Bad request';
    return { code, detail, headers: {}, unexpected: false };
  }
  if (isDependencyUnavailable(error)) {
    const internalDetail = error instanceof Error ? error.message : String(error);
    return { code: ErrorCode.DependencyUnavailable, detail: UNAVAILABLE_DETAIL, headers: withRetryAfter(ErrorCode.DependencyUnavailable, {}), unexpected: false, internalDetail };
  }
  return { code: ErrorCode.Internal, detail: 'An unexpected error occurred', headers: {}, unexpected: true };
}
