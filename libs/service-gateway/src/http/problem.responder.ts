import type { FastifyReply, FastifyRequest } from 'fastify';
import { type Logger, redactQuery } from '@mission/runtime';
import { mapError } from './error-mapping';
import { PROBLEM_CONTENT_TYPE, problemFor } from './problem';

/**
 * Writes any error as problem+json. Shared by the Nest exception filter and Fastify's own error
 * handler (body parsing fails before Nest sees the request), so both speak the same format.
 */
export function sendProblem(error: unknown, request: FastifyRequest, reply: FastifyReply, logger: Logger, typeBase: string): void {
  const mapped = mapError(error);
  // Query strings carry tenant content (a Brain search, cursors): their values never reach a log.
  if (mapped.unexpected) logger.error({ err: error, requestId: request.id, url: redactQuery(request.url) }, 'Unhandled error');
  else if (mapped.internalDetail) logger.warn({ requestId: request.id, url: redactQuery(request.url), detail: mapped.internalDetail }, 'Answered 503: a dependency is unavailable');
  const problem = problemFor(mapped.code, mapped.detail, { instance: request.url.split('?')[0] ?? '/', requestId: String(request.id), typeBase }, mapped.errors);
  void reply
    .status(problem.status)
    .headers({ ...mapped.headers, 'content-type': PROBLEM_CONTENT_TYPE, 'cache-control': 'no-store' })
    .send(JSON.stringify(problem));
}
