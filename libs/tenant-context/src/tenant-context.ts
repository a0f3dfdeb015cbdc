import { isUuid } from '@mission/contracts';
import { currentScope, runInScope } from './scope';

/** The tenant a request or message acts for. Everything tenant-scoped reads it from here. */
export interface TenantContext {
  readonly tenantId: string;
  /** The token subject (a client id or a user id) acting for the tenant, when known. */
  readonly subject?: string;
  readonly scopes?: readonly string[];
}

export class MissingTenantContextError extends Error {
  constructor() {
    super('No tenant context is set: tenant-scoped code ran outside a tenant request or message');
    this.name = 'MissingTenantContextError';
  }
}

export function isTenantId(value: unknown): value is string {
  return isUuid(value);
}

/** The scope part that makes `context` the current tenant (for `runWithTrace`'s `alongside`); refuses an invalid tenant id. */
export function tenantScope(context: TenantContext): { readonly tenant: TenantContext } {
  if (!isTenantId(context.tenantId)) {
    throw new Error(`Refusing to run with an invalid tenant id: ${JSON.stringify(context.tenantId)}`);
  }
  return { tenant: Object.freeze({ ...context }) };
}

/** Runs `fn` with `context` as the current tenant for everything it awaits. */
export function runWithTenant<T>(context: TenantContext, fn: () => T): T {
  return runInScope(tenantScope(context), fn);
}

/** The current tenant. Throws when there is none: a missing tenant is a bug, never "all tenants". */
export function currentTenant(): TenantContext {
  const context = currentScope()?.tenant;
  if (!context) throw new MissingTenantContextError();
  return context;
}

/** For code that legitimately runs both inside and outside a tenant (logging, the bus adapters). */
export function optionalTenant(): TenantContext | undefined {
  return currentScope()?.tenant;
}

/**
 * Runs `fn` outside any tenant context, whatever the caller's: for platform-level work (operator
 * requests, cross-tenant sweeps) that must never act for the tenant it happened to be called from.
 */
export function runWithoutTenant<T>(fn: () => T): T {
  return runInScope({ tenant: undefined }, fn);
}
