import type { FastifyReply } from 'fastify';
import { ErrorCode } from '@mission/contracts';
import { rateLimitHeaders } from '@mission/rate-limit';
import { unauthorizedProblem } from '../auth/authenticate';
import { HttpProblemError } from '../http/http-problem.error';
import { TenantRateLimiter } from './tenant-rate-limiter';

/**
 * Takes one token from the tenant's bucket and writes the RateLimit fields on the reply; a 429
 * with Retry-After when there was none left, a 401 when the token's tenant no longer exists.
 */
export async function chargeTenant(tenantId: string, reply: FastifyReply, rateLimits: TenantRateLimiter, publicUrl: string): Promise<void> {
  const decision = await rateLimits.admit(tenantId);
  if (!decision) throw unauthorizedProblem(publicUrl, 'The token’s tenant does not exist', true);
  void reply.headers(rateLimitHeaders(decision));
  if (!decision.allowed) {
    const { policy, retryAfterSeconds } = decision;
    throw new HttpProblemError(ErrorCode.RateLimited, `The ${policy.name} limit of ${policy.limit} requests per minute is used up; retry after ${retryAfterSeconds} s`, {
      'Retry-After': String(retryAfterSeconds),
    });
  }
}
