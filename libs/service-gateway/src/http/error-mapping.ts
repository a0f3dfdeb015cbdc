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

const FASTIFY_CODES: Readonly<Record<string, [ErrorCode, string]>> = {
  FST_ERR_CTP_BODY_TOO_LARGE: [ErrorCode.PayloadTooLarge, 'The request body is too large'],
  FST_ERR_CTP_INVALID_MEDIA_TYPE: [ErrorCode.UnsupportedMediaType, 'Send the request body as application/json'],
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: [ErrorCode.MalformedJson, 'Content-Length does not match the body'],
  FST_ERR_CTP_EMPTY_JSON_BODY: [ErrorCode.MalformedJson, 'The JSON body is empty'],
  FST_ERR_CTP_INVALID_JSON_BODY: [ErrorCode.MalformedJson, 'The body is not valid JSON'],
};

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
  const fastifyCode = (error as { code?: unknown })?.code;
  if (typeof fastifyCode === 'string' && FASTIFY_CODES[fastifyCode]) {
    const [code, detail] = FASTIFY_CODES[fastifyCode];
    return { code, detail, headers: {}, unexpected: false };
  }
  if (error instanceof SyntaxError && (error as { statusCode?: number }).statusCode === 400) {
    return { code: ErrorCode.MalformedJson, detail: 'The body is not valid JSON', headers: {}, unexpected: false };
  }
  const status = error instanceof HttpException ? error.getStatus() : (error as { statusCode?: unknown })?.statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500 && STATUS_CODES[status]) {
    const code = STATUS_CODES[status];
    const detail = code === ErrorCode.NotFound ? 'No such resource' : error instanceof Error ? error.message : 'Bad request';
    return { code, detail, headers: {}, unexpected: false };
  }
  return { code: ErrorCode.Internal, detail: 'An unexpected error occurred', headers: {}, unexpected: true };
}
