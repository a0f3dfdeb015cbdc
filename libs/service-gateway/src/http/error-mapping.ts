import { HttpException } from '@nestjs/common';
import { DomainError, ErrorCode, FieldError } from '@mission/contracts';
import { HttpProblemError } from './http-problem.error';
import { DEPENDENCY_RETRY_AFTER_SECONDS } from './problem';

export interface MappedError {
  readonly code: ErrorCode;
  readonly detail: string;
  readonly errors?: readonly FieldError[];
  readonly headers: Readonly<Record<string, string>>;
  /** Unexpected: log it with its stack; the client only sees a generic 500. */
  readonly unexpected: boolean;
}

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
    return {
      code: error.code,
      detail: internal ? 'An unexpected error occurred' : error.message,
      errors: error.errors,
      headers: withRetryAfter(error.code, headers),
      unexpected: false,
    };
  }
  const status = error instanceof HttpException ? error.getStatus() : (error as { statusCode?: unknown })?.statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500 && STATUS_CODES[status]) {
    const code = STATUS_CODES[status];
    const detail = code === ErrorCode.NotFound ? 'No such resource' : error instanceof Error ? error.message : 'Bad request';
    return { code, detail, headers: {}, unexpected: false };
  }
  return { code: ErrorCode.Internal, detail: 'An unexpected error occurred', headers: {}, unexpected: true };
}
