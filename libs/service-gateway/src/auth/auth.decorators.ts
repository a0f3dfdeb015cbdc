import { createParamDecorator, ExecutionContext, SetMetadata } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import { Scope } from '@mission/contracts';
import { Authenticated } from './authenticated';

export const ACCESS_KEY = 'mission:access';

export type AccessRule = { readonly kind: 'public' } | { readonly kind: 'tenant'; readonly scopes: readonly Scope[] } | { readonly kind: 'operator' };

/** No token needed. */
export const Public = (): MethodDecorator & ClassDecorator => SetMetadata(ACCESS_KEY, { kind: 'public' } satisfies AccessRule);

/** A tenant token holding every one of `scopes`. */
export const TenantScopes = (...scopes: Scope[]): MethodDecorator & ClassDecorator => SetMetadata(ACCESS_KEY, { kind: 'tenant', scopes } satisfies AccessRule);

/** The platform operator (`platform:admin`); tenant tokens never pass. */
export const Operator = (): MethodDecorator & ClassDecorator => SetMetadata(ACCESS_KEY, { kind: 'operator' } satisfies AccessRule);

/** The verified caller; only on routes the AuthGuard protected, otherwise it refuses to run. */
export const Caller = createParamDecorator((_: unknown, context: ExecutionContext): Authenticated => {
  const auth = context.switchToHttp().getRequest<FastifyRequest>().auth;
  if (!auth) throw new Error('Caller used on a route without authentication');
  return auth;
});
