import { createParamDecorator, ExecutionContext } from '@nestjs/common';
import { RouteConfig } from '@nestjs/platform-fastify';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { type OperationAccess, Scopes } from '@mission/contracts';
import { chargeTenant } from '../rate-limit/charge-tenant';
import type { TenantRateLimiter } from '../rate-limit/tenant-rate-limiter';
import { authenticate, insufficientScopeProblem } from './authenticate';
import type { Authenticated } from './authenticated';
import type { TokenVerifier } from './token-verifier';

/*
 * Who may call a route is declared once, with the route (`Access`, which `Operation` and the
 * catalogue's routes apply), and carried in the route's Fastify config. The arrival hook reads it
 * there and enforces all of it before the body is read: authentication, the tenant's rate limit,
 * then the scopes. Nothing else decides access.
 */

/** What a route's Fastify config carries. */
export interface RouteAccessConfig {
  readonly access: OperationAccess;
  /** Bodies up to this many bytes instead of the gateway's default. */
  readonly bodyLimit?: number;
}

/** Declares who may call a route (and, where it differs, how large its body may be). The only writer of a route's Fastify config. */
export function Access(access: OperationAccess, options: { readonly bodyLimit?: number } = {}): MethodDecorator {
  return RouteConfig({ access, ...options } satisfies RouteAccessConfig);
}

/**
 * The config a route is registered with: its own declaration, or `public` for a route its owner
 * registers without one and declares public as a whole (the OpenAPI module's document and UI). Any
 * other route without a declaration is refused, so the gateway does not start with it.
 */
export function declaredRouteConfig(
  route: { readonly method: string | readonly string[]; readonly url: string; readonly config?: unknown },
  ownedPublic: (url: string) => boolean,
): RouteAccessConfig {
  const config = route.config as Partial<RouteAccessConfig> | undefined;
  if (config?.access !== undefined) return config as RouteAccessConfig;
  if (!ownedPublic(route.url)) throw new Error(`Route ${String(route.method)} ${route.url} declares no access rule`);
  return { ...config, access: 'public' };
}

/**
 * Paths under which a request is a tenant's even when no route serves it: a misrouted tenant
 * request is authenticated and counts against its budget like any other (README, "Rate limits").
 */
const TENANT_NAMESPACES = ['/api', '/mcp'];

function inTenantNamespace(path: string): boolean {
  return TENANT_NAMESPACES.some((namespace) => path === namespace || path.startsWith(`${namespace}/`));
}

/** The access a route declared; undefined for a request no route serves. */
function declaredAccess(request: Pick<FastifyRequest, 'routeOptions'>): OperationAccess | undefined {
  if (request.routeOptions.url === undefined) return undefined;
  return (request.routeOptions.config as Partial<RouteAccessConfig> | undefined)?.access;
}

export interface AccessDependencies {
  readonly verifier: TokenVerifier;
  readonly rateLimits: TenantRateLimiter;
  readonly publicUrl: string;
}

/**
 * Enforces the route's access on arrival, before the body is read, and leaves the caller on the
 * request. Tenant routes: a valid token (401 otherwise, whatever the body), one token of the
 * tenant's budget (429 when empty; every later answer carries the RateLimit fields, a 403 for a
 * missing scope included), then a tenant token holding the route's scopes. Operator routes: a valid
 * token of the platform operator. A request no route serves under a tenant namespace is
 * authenticated and charged, then answered 404. `decodedPath` is the path as the router saw it.
 */
export async function enforceAccess(request: FastifyRequest, reply: FastifyReply, decodedPath: string, dependencies: AccessDependencies): Promise<void> {
  const declared = declaredAccess(request);
  if (request.routeOptions.url !== undefined && declared === undefined) {
    throw new Error(`Route ${request.method} ${request.routeOptions.url} declares no access rule`);
  }
  const access = declared ?? (inTenantNamespace(decodedPath) ? 'unrouted-tenant' : 'public');
  if (access === 'public') return;
  const auth = await authenticate(request.headers.authorization, dependencies.verifier, dependencies.publicUrl);
  request.auth = auth;
  if (access === 'operator') {
    if (!auth.scopes.has(Scopes.platformAdmin) || auth.tenantId) throw insufficientScopeProblem(dependencies.publicUrl, [Scopes.platformAdmin]);
    return;
  }
  // A token without a tenant (the operator's) has no budget; it is refused below.
  if (auth.tenantId && dependencies.rateLimits.enabled) {
    await chargeTenant(auth.tenantId, reply, dependencies.rateLimits, dependencies.publicUrl);
  }
  if (access === 'unrouted-tenant') return;
  if (!auth.tenantId || access.scopes.some((scope) => !auth.scopes.has(scope))) throw insufficientScopeProblem(dependencies.publicUrl, access.scopes);
}

/** The verified caller; only on routes that declared a tenant's or the operator's access, otherwise it refuses to run. */
export const Caller = createParamDecorator((_: unknown, context: ExecutionContext): Authenticated => {
  const auth = context.switchToHttp().getRequest<FastifyRequest>().auth;
  if (!auth) throw new Error('Caller used on a route without authentication');
  return auth;
});
