import { CanActivate, ExecutionContext, Inject, Injectable } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { FastifyRequest } from 'fastify';
import { ErrorCode, Scopes } from '@mission/contracts';
import { GATEWAY_OPTIONS, GatewayOptions } from '../gateway.options';
import { HttpProblemError } from '../http/http-problem.error';
import { ACCESS_KEY, AccessRule } from './auth.decorators';
import { InvalidTokenError, TokenVerifier } from './token-verifier';

const BEARER = /^Bearer[ ]+([A-Za-z0-9\-._~+/]+=*)$/i;

function quoted(value: string): string {
  return `"${value.replace(/["\\]/g, '')}"`;
}

function resourceMetadata(publicUrl: string): string {
  return `${publicUrl.replace(/\/$/, '')}/.well-known/oauth-protected-resource`;
}

/** A 401 with its Bearer challenge; RFC 6750 §3: no error code when no token was presented at all. */
export function unauthorizedProblem(publicUrl: string, description: string, tokenPresented: boolean): HttpProblemError {
  const parts = [`realm="mission-service"`, `resource_metadata=${quoted(resourceMetadata(publicUrl))}`];
  if (tokenPresented) parts.push(`error="invalid_token"`, `error_description=${quoted(description)}`);
  return new HttpProblemError(ErrorCode.Unauthorized, description, { 'WWW-Authenticate': `Bearer ${parts.join(', ')}` });
}

/** A 403 naming the scopes the operation needs, so that a client can ask for them (step-up). */
export function insufficientScopeProblem(publicUrl: string, needed: readonly string[]): HttpProblemError {
  const scope = needed.join(' ');
  return new HttpProblemError(ErrorCode.InsufficientScope, `This operation needs the scope ${scope}`, {
    'WWW-Authenticate': `Bearer realm="mission-service", error="insufficient_scope", scope=${quoted(scope)}, resource_metadata=${quoted(resourceMetadata(publicUrl))}`,
  });
}

/**
 * Authenticates every request unless the route is @Public, then enforces the route's access rule.
 * Routes must declare a rule: an undeclared route fails closed.
 */
@Injectable()
export class AuthGuard implements CanActivate {
  constructor(
    private readonly reflector: Reflector,
    private readonly verifier: TokenVerifier,
    @Inject(GATEWAY_OPTIONS) private readonly options: GatewayOptions,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const rule = this.reflector.getAllAndOverride<AccessRule | undefined>(ACCESS_KEY, [context.getHandler(), context.getClass()]);
    if (!rule) throw new Error(`Route ${context.getClass().name}.${context.getHandler().name} declares no access rule`);
    if (rule.kind === 'public') return true;

    const request = context.switchToHttp().getRequest<FastifyRequest>();
    const header = request.headers.authorization;
    if (header === undefined) throw this.unauthorized('A bearer token is required');
    const token = BEARER.exec(header)?.[1];
    if (!token) throw this.unauthorized('The Authorization header must be "Bearer <token>"', true);

    try {
      request.auth = await this.verifier.verify(token);
    } catch (error) {
      if (error instanceof InvalidTokenError) throw this.unauthorized(error.message, true);
      throw error;
    }

    const needed = rule.kind === 'operator' ? [Scopes.platformAdmin] : rule.scopes;
    const missing = needed.filter((scope) => !request.auth?.scopes.has(scope));
    if (missing.length > 0) throw this.insufficientScope(needed);
    if (rule.kind === 'tenant' && !request.auth.tenantId) throw this.insufficientScope(needed);
    if (rule.kind === 'operator' && request.auth.tenantId) throw this.insufficientScope(needed);
    return true;
  }

  private unauthorized(description: string, tokenPresented = false): HttpProblemError {
    return unauthorizedProblem(this.options.publicUrl, description, tokenPresented);
  }

  private insufficientScope(needed: readonly string[]): HttpProblemError {
    return insufficientScopeProblem(this.options.publicUrl, needed);
  }
}
