import { randomUUID } from 'node:crypto';
import {
  currentTenant,
  InvalidTenantHeaderError,
  MissingTenantContextError,
  optionalTenant,
  runWithTenant,
  TENANT_HEADER,
  tenantFromHeaders,
  tenantHeaders,
  tenantRedisKey,
} from './index';

describe('tenant context', () => {
  it('throws when tenant-scoped code runs without a tenant', () => {
    expect(() => currentTenant()).toThrow(MissingTenantContextError);
    expect(optionalTenant()).toBeUndefined();
  });

  it('keeps the tenant across awaits and isolates concurrent runs', async () => {
    const a = randomUUID();
    const b = randomUUID();
    const seen = await Promise.all(
      [a, b].map((tenantId) =>
        runWithTenant({ tenantId }, async () => {
          await new Promise((resolve) => setTimeout(resolve, 5));
          return currentTenant().tenantId;
        }),
      ),
    );
    expect(seen).toEqual([a, b]);
  });

  it('refuses an invalid tenant id', () => {
    expect(() => runWithTenant({ tenantId: 'not-a-uuid' }, () => 1)).toThrow(/invalid tenant id/);
  });

  it('round-trips the tenant through message headers', () => {
    const tenantId = randomUUID();
    const headers = runWithTenant({ tenantId }, () => tenantHeaders());
    expect(headers).toEqual({ [TENANT_HEADER]: tenantId });
    expect(tenantFromHeaders(headers)).toEqual({ tenantId });
    expect(tenantHeaders()).toEqual({});
  });

  it('treats a missing header as no tenant but a malformed one as an error', () => {
    expect(tenantFromHeaders({})).toBeUndefined();
    expect(() => tenantFromHeaders({ [TENANT_HEADER]: 'x; DROP TABLE' })).toThrow(InvalidTenantHeaderError);
  });

  it('namespaces Redis keys by the current tenant', () => {
    const tenantId = randomUUID();
    expect(runWithTenant({ tenantId }, () => tenantRedisKey('rl', 'bucket'))).toBe(`rl:t:${tenantId}:bucket`);
    expect(() => tenantRedisKey('rl')).toThrow(MissingTenantContextError);
  });
});
