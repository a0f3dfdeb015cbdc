import { ErrorCode, FieldError } from '@mission/contracts';

/** RFC 9457 problem details, as every error response carries them. */
export interface ProblemDetails {
  readonly type: string;
  readonly title: string;
  readonly status: number;
  readonly detail: string;
  readonly instance: string;
  readonly code: ErrorCode;
  readonly requestId: string;
  readonly errors?: readonly FieldError[];
}

interface ProblemKind {
  readonly status: number;
  readonly title: string;
  readonly slug: string;
}

/** The single mapping from domain error codes to HTTP. */
export const PROBLEM_KINDS: Readonly<Record<ErrorCode, ProblemKind>> = {
  [ErrorCode.ValidationFailed]: { status: 400, title: 'Validation failed', slug: 'validation-failed' },
  [ErrorCode.MalformedJson]: { status: 400, title: 'Malformed JSON', slug: 'malformed-json' },
  [ErrorCode.MalformedRequest]: { status: 400, title: 'Malformed request', slug: 'malformed-request' },
  [ErrorCode.CursorExpired]: { status: 400, title: 'Unknown or expired position', slug: 'cursor-expired' },
  [ErrorCode.Unauthorized]: { status: 401, title: 'Unauthorized', slug: 'unauthorized' },
  [ErrorCode.InsufficientScope]: { status: 403, title: 'Insufficient scope', slug: 'insufficient-scope' },
  [ErrorCode.Forbidden]: { status: 403, title: 'Forbidden', slug: 'forbidden' },
  [ErrorCode.NotAnAssignee]: { status: 403, title: 'Not an assignee', slug: 'not-an-assignee' },
  [ErrorCode.ApprovalExpired]: { status: 409, title: 'Approval expired', slug: 'approval-expired' },
  [ErrorCode.QuotaExceeded]: { status: 403, title: 'Storage quota exceeded', slug: 'storage-quota-exceeded' },
  [ErrorCode.NotFound]: { status: 404, title: 'Not found', slug: 'not-found' },
  [ErrorCode.RequestTimeout]: { status: 408, title: 'Request timeout', slug: 'request-timeout' },
  [ErrorCode.Conflict]: { status: 409, title: 'Conflict', slug: 'conflict' },
  [ErrorCode.PayloadTooLarge]: { status: 413, title: 'Payload too large', slug: 'payload-too-large' },
  [ErrorCode.UnsupportedMediaType]: { status: 415, title: 'Unsupported media type', slug: 'unsupported-media-type' },
  [ErrorCode.IdempotencyKeyReused]: { status: 422, title: 'Idempotency key reused', slug: 'idempotency-key-reused' },
  [ErrorCode.RateLimited]: { status: 429, title: 'Too many requests', slug: 'quota-exceeded' },
  [ErrorCode.HeadersTooLarge]: { status: 431, title: 'Request header fields too large', slug: 'headers-too-large' },
  [ErrorCode.Internal]: { status: 500, title: 'Internal server error', slug: 'internal-error' },
  [ErrorCode.DependencyUnavailable]: { status: 503, title: 'Service unavailable', slug: 'service-unavailable' },
};

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

/** Seconds a client should wait before retrying after a 503. */
export const DEPENDENCY_RETRY_AFTER_SECONDS = 5;

export function problemFor(
  code: ErrorCode,
  detail: string,
  context: { readonly instance: string; readonly requestId: string; readonly typeBase: string },
  errors?: readonly FieldError[],
): ProblemDetails {
  const kind = PROBLEM_KINDS[code];
  return {
    type: `${context.typeBase}#${kind.slug}`,
    title: kind.title,
    status: kind.status,
    detail,
    instance: context.instance,
    code,
    requestId: context.requestId,
    ...(errors && errors.length > 0 ? { errors } : {}),
  };
}
