import { HttpException, NotFoundException } from '@nestjs/common';
import { DomainError, ErrorCode } from '@mission/contracts';
import { mapError, UNAVAILABLE_DETAIL } from './error-mapping';
import { HttpProblemError } from './http-problem.error';
import { PROBLEM_KINDS, problemFor } from './problem';

describe('mapError', () => {
  it('keeps a domain error code, message and field errors', () => {
    const mapped = mapError(new DomainError(ErrorCode.ValidationFailed, 'Mission is invalid', [{ field: 'title', message: 'too short' }]));
    expect(mapped).toMatchObject({ code: ErrorCode.ValidationFailed, detail: 'Mission is invalid', errors: [{ field: 'title', message: 'too short' }], unexpected: false });
  });

  it('carries the headers of an HTTP problem', () => {
    const mapped = mapError(new HttpProblemError(ErrorCode.Unauthorized, 'no token', { 'WWW-Authenticate': 'Bearer realm="x"' }));
    expect(mapped.headers).toEqual({ 'WWW-Authenticate': 'Bearer realm="x"' });
  });

  it('adds Retry-After to a dependency failure, and keeps which part failed for the log only', () => {
    const mapped = mapError(new DomainError(ErrorCode.DependencyUnavailable, 'No answer to mission.get on mission.requests.v1 within 10000 ms'));
    expect(mapped).toEqual({
      code: ErrorCode.DependencyUnavailable,
      detail: UNAVAILABLE_DETAIL,
      errors: undefined,
      headers: { 'Retry-After': '5' },
      unexpected: false,
      internalDetail: 'No answer to mission.get on mission.requests.v1 within 10000 ms',
    });
    expect(mapped.detail).not.toMatch(/mission\.|requests|within/);
  });

  it('answers 503 for a peer the gateway itself cannot reach, naming none of it', () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED 10.0.0.7:6379'), { code: 'ECONNREFUSED' });
    expect(mapError(refused)).toMatchObject({ code: ErrorCode.DependencyUnavailable, detail: UNAVAILABLE_DETAIL, headers: { 'Retry-After': '5' }, unexpected: false });
  });

  it.each([
    [413, ErrorCode.PayloadTooLarge],
    [415, ErrorCode.UnsupportedMediaType],
    [405, ErrorCode.NotFound],
  ])('maps an HTTP-stack error with status %s', (status, expected) => {
    expect(mapError(new HttpException('from fastify', status)).code).toBe(expected);
  });

  it('maps an unknown route to not_found', () => {
    expect(mapError(new NotFoundException('Cannot GET /x')).code).toBe(ErrorCode.NotFound);
  });

  it('never reveals an unexpected error, and flags it for the log', () => {
    const mapped = mapError(new TypeError("Cannot read properties of undefined (reading 'rows') at pg/lib/client.js:132"));
    expect(mapped).toEqual({ code: ErrorCode.Internal, detail: 'An unexpected error occurred', headers: {}, unexpected: true });
  });

  it('hides the message of an internal domain error', () => {
    expect(mapError(new DomainError(ErrorCode.Internal, 'table mission.missions missing')).detail).toBe('An unexpected error occurred');
  });
});

describe('problemFor', () => {
  it('builds RFC 9457 problem details with our extensions', () => {
    const problem = problemFor(ErrorCode.RateLimited, 'Slow down', { instance: '/api/missions', requestId: 'r1', typeBase: 'http://h/api/docs/problems' });
    expect(problem).toEqual({
      type: 'http://h/api/docs/problems#quota-exceeded',
      title: 'Too many requests',
      status: 429,
      detail: 'Slow down',
      instance: '/api/missions',
      code: 'rate_limited',
      requestId: 'r1',
    });
  });

  it('gives every error code a distinct slug and an error status', () => {
    const kinds = Object.values(PROBLEM_KINDS);
    expect(new Set(kinds.map((k) => k.slug)).size).toBe(kinds.length);
    expect(kinds.every((k) => k.status >= 400 && k.status < 600)).toBe(true);
  });
});
