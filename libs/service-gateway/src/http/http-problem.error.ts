import { DomainError, ErrorCode, FieldError } from '@mission/contracts';

/** A DomainError that also needs response headers (WWW-Authenticate, Retry-After, …). */
export class HttpProblemError extends DomainError {
  constructor(
    code: ErrorCode,
    message: string,
    readonly headers: Readonly<Record<string, string>>,
    errors?: readonly FieldError[],
  ) {
    super(code, message, errors);
    this.name = 'HttpProblemError';
  }
}
