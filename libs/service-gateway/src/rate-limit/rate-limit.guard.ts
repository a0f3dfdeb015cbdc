import { CanActivate, ExecutionContext, Inject, Injectable } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ErrorCode } from '@mission/contracts';
import { rateLimitHeaders } from '@mission/rate-limit';
import { ACCESS_KEY, AccessRule } from '../auth/auth.decorators';
import { unauthorizedProblem } from '../auth/auth.guard';
import { GATEWAY_OPTIONS, GatewayOptions } from '../gateway.options';
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

/**
 * Takes every tenant request from its tenant's budget (tenant paths were charged already, before
 * their body was read: see the gateway's request hook), after the AuthGuard (registered after it)
 * and before the ScopeGuard and the handler, and writes the RateLimit fields on the response,
 * whatever its status turns out to be (a 403 for a missing scope included). Public and operator
 * routes are not limited.
 */
@Injectable()
export class RateLimitGuard implements CanActivate {
  constructor(
    private readonly reflector: Reflector,
    private readonly rateLimits: TenantRateLimiter,
    @Inject(GATEWAY_OPTIONS) private readonly options: GatewayOptions,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    if (!this.rateLimits.enabled) return true;
    const rule = this.reflector.getAllAndOverride<AccessRule | undefined>(ACCESS_KEY, [context.getHandler(), context.getClass()]);
    if (rule?.kind !== 'tenant') return true;
    const http = context.switchToHttp();
    const request = http.getRequest<FastifyRequest>();
    if (request.rateLimitCharged) return true;
    const auth = request.auth;
    if (!auth) throw new Error('The rate limit ran before authentication: RateLimitGuard must come after AuthGuard');
    // A token without a tenant (the operator's) has no budget here; the ScopeGuard refuses it.
    const tenantId = auth.tenantId;
    if (!tenantId) return true;

    await chargeTenant(tenantId, http.getResponse<FastifyReply>(), this.rateLimits, this.options.publicUrl);
    return true;
  }
}
