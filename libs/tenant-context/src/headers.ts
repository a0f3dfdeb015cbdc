import { isTenantId, optionalTenant, TenantContext } from './tenant-context';

/** Message header that carries the tenant across the bus. */
export const TENANT_HEADER = 'tenant-id';

/** Headers that put the current tenant (if any) on an outgoing message. */
export function tenantHeaders(context: TenantContext | undefined = optionalTenant()): Record<string, string> {
  return context ? { [TENANT_HEADER]: context.tenantId } : {};
}

export class InvalidTenantHeaderError extends Error {
  constructor(value: string) {
    super(`Message carries an invalid ${TENANT_HEADER} header: ${JSON.stringify(value.slice(0, 64))}`);
    this.name = 'InvalidTenantHeaderError';
  }
}

/**
 * Reads the tenant back from message headers. Absent → undefined (an operator message);
 * present but malformed → throws, so a corrupted header is never treated as "no tenant".
 */
export function tenantFromHeaders(headers: Readonly<Record<string, string | undefined>>): TenantContext | undefined {
  const value = headers[TENANT_HEADER];
  if (value === undefined) return undefined;
  if (!isTenantId(value)) throw new InvalidTenantHeaderError(value);
  return { tenantId: value.toLowerCase() };
}
