import { CanActivate, ExecutionContext, Inject, Injectable } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { FastifyRequest } from 'fastify';
import { ErrorCode, Scopes } from '@mission/contracts';
import { GATEWAY_OPTIONS, GatewayOptions } from '../gateway.options';
import { HttpProblemError } from '../http/http-problem.error';
import { ACCESS_KEY, AccessRule } from './auth.decorators';
import type { Authenticated } from './authenticated';
import { InvalidTokenError, TokenVerifier } from './token-verifier';

const BEARER = /^Bearer[ ]+([A-Za-z0-9\-._~+/]+=*)$/i;
const BEARER_SCHEME = /^Bearer(?:[ ]|$)/i;

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

/**
 * A 403 naming the scopes the operation needs, so that a client can ask for them (step-up). With
 * none to name (an endpoint whose operations check their own scopes, refused to a token without a
 * tenant), the challenge carries no scope.
 */
export function insufficientScopeProblem(publicUrl: string, needed: readonly string[]): HttpProblemError {
  const scope = needed.join(' ');
  const detail = needed.length > 0 ? `This operation needs the scope ${scope}` : 'This endpoint needs a token issued to a tenant';
  return new HttpProblemError(ErrorCode.InsufficientScope, detail, {
    'WWW-Authenticate': `Bearer realm="mission-service", error="insufficient_scope"${needed.length > 0 ? `, scope=${quoted(scope)}` : ''}, resource_metadata=${quoted(resourceMetadata(publicUrl))}`,
  });
}

function ruleOf(reflector: Reflector, context: ExecutionContext): AccessRule {
  const rule = reflector.getAllAndOverride<AccessRule | undefined>(ACCESS_KEY, [context.getHandler(), context.getClass()]);
  if (!rule) throw new Error(`Route ${context.getClass().name}.${context.getHandler().name} declares no access rule`);
  return rule;
}

/**
 * The caller of a request from its Authorization header, or a 401 with the Bearer challenge:
 * without an error code when no bearer token was presented (no header, or another scheme: RFC
 * 6750 §3.1), with `invalid_token` for a malformed or invalid one. Errors reaching the identity
 * provider propagate (503).
 */
export async function authenticate(header: string | undefined, verifier: TokenVerifier, publicUrl: string): Promise<Authenticated> {
  if (header === undefined || !BEARER_SCHEME.test(header)) throw unauthorizedProblem(publicUrl, 'A bearer token is required', false);
  const token = BEARER.exec(header)?.[1];
  if (!token) throw unauthorizedProblem(publicUrl, 'The Authorization header must be "Bearer <token>"', true);
  try {
    return await verifier.verify(token);
  } catch (error) {
    if (error instanceof InvalidTokenError) throw unauthorizedProblem(publicUrl, error.message, true);
    throw error;
  }
}

/**
 * Authenticates every request unless the route is @Public (tenant paths were authenticated
 * already, before their body was read: see the gateway's request hook). Routes must declare a
 * rule: an undeclared route fails closed. What the token may do is the ScopeGuard's, which runs
 * after the tenant's rate limit: a tenant request refused for its scopes still counts and carries
 * the RateLimit fields.
 */
@Injectable()
export class AuthGuard implements CanActivate {
  constructor(
    private readonly reflector: Reflector,
    private readonly verifier: TokenVerifier,
    @Inject(GATEWAY_OPTIONS) private readonly options: GatewayOptions,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    if (ruleOf(this.reflector, context).kind === 'public') return true;
    const request = context.switchToHttp().getRequest<FastifyRequest>();
    request.auth ??= await authenticate(request.headers.authorization, this.verifier, this.options.publicUrl);
    return true;
  }
}

/** Enforces the route's access rule on the authenticated caller (registered after the RateLimitGuard). */
@Injectable()
export class ScopeGuard implements CanActivate {
  constructor(
    private readonly reflector: Reflector,
    @Inject(GATEWAY_OPTIONS) private readonly options: GatewayOptions,
  ) {}

  canActivate(context: ExecutionContext): boolean {
    const rule = ruleOf(this.reflector, context);
    if (rule.kind === 'public') return true;
    const auth = context.switchToHttp().getRequest<FastifyRequest>().auth;
    if (!auth) throw new Error('The scope check ran before authentication: ScopeGuard must come after AuthGuard');
    const needed = rule.kind === 'operator' ? [Scopes.platformAdmin] : rule.scopes;
    const missing = needed.some((scope) => !auth.scopes.has(scope));
    const wrongKind = rule.kind === 'tenant' ? !auth.tenantId : Boolean(auth.tenantId);
    if (missing || wrongKind) throw insufficientScopeProblem(this.options.publicUrl, needed);
    return true;
  }
}
