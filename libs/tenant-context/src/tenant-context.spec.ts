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
  currentTraceparent,
  newTraceparent,
  parseTraceparent,
  runWithoutTenant,
  runWithTrace,
  TRACEPARENT_HEADER,
  traceHeaders,
  currentRequestId,
  runWithRequestId,
  tenantScope,
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

describe('trace context', () => {
  it('accepts only version-00 traceparents with non-zero ids', () => {
    expect(parseTraceparent('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01')).toEqual({
      traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
      parentId: '00f067aa0ba902b7',
      flags: '01',
    });
    for (const bad of [
      '',
      'garbage',
      '00-00000000000000000000000000000000-00f067aa0ba902b7-01',
      '00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01',
      '01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
      '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x',
      '00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01',
      '00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01',
    ]) {
      expect(parseTraceparent(bad)).toBeUndefined();
    }
  });

  it('continues the current trace on outgoing headers with a new span, and starts one when none is valid', () => {
    const incoming = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const outgoing = runWithTrace(incoming, () => traceHeaders())[TRACEPARENT_HEADER];
    expect(parseTraceparent(outgoing)).toMatchObject({ traceId: '4bf92f3577b34da6a3ce929d0e0e4736', flags: '01' });
    expect(outgoing).not.toBe(incoming);
    expect(traceHeaders()).toEqual({});
    expect(parseTraceparent(runWithTrace('nonsense', () => currentTraceparent()))).toBeDefined();
    expect(parseTraceparent(newTraceparent())?.traceId).toMatch(/^[0-9a-f]{32}$/);
  });

  it('takes a traceparent with surrounding blanks, cut at the same places', () => {
    expect(parseTraceparent(' 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\t')).toEqual({
      traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
      parentId: '00f067aa0ba902b7',
      flags: '01',
    });
  });

  it('enters a tenant and a request id in the same scope as a trace (alongside), and leaves the tenant with tenant: undefined', async () => {
    const tenantId = randomUUID();
    const trace = newTraceparent();
    const seen = await runWithTrace(
      trace,
      async () => {
        await Promise.resolve();
        return { tenant: currentTenant().tenantId, trace: currentTraceparent(), request: currentRequestId() };
      },
      undefined,
      { requestId: 'req-2', ...tenantScope({ tenantId }) },
    );
    expect(seen).toEqual({ tenant: tenantId, trace, request: 'req-2' });
    const left = runWithTenant({ tenantId }, () => runWithTrace(trace, () => optionalTenant(), undefined, { tenant: undefined }));
    expect(left).toBeUndefined();
    expect(() => tenantScope({ tenantId: "x' OR 1=1" })).toThrow(/invalid tenant id/);
    expect(Object.isFrozen(tenantScope({ tenantId }).tenant)).toBe(true);
  });

  it('leaves the tenant context on request', () => {
    const tenantId = randomUUID();
    expect(runWithTenant({ tenantId }, () => runWithoutTenant(() => optionalTenant()))).toBeUndefined();
  });

  it('keeps the trace and the request id when the tenant is entered or left, and each part when another changes', async () => {
    const tenantId = randomUUID();
    const trace = newTraceparent();
    const seen = await runWithRequestId('req-1', () =>
      runWithTrace(trace, () =>
        runWithTenant({ tenantId }, async () => {
          await Promise.resolve();
          const inside = { tenant: optionalTenant()?.tenantId, trace: currentTraceparent(), request: currentRequestId() };
          const left = runWithoutTenant(() => ({ tenant: optionalTenant(), trace: currentTraceparent(), request: currentRequestId() }));
          const otherTrace = runWithTrace(newTraceparent(), () => ({ tenant: optionalTenant()?.tenantId, request: currentRequestId() }));
          return { inside, left, otherTrace };
        }),
      ),
    );
    expect(seen).toEqual({
      inside: { tenant: tenantId, trace, request: 'req-1' },
      left: { tenant: undefined, trace, request: 'req-1' },
      otherTrace: { tenant: tenantId, request: 'req-1' },
    });
    expect({ tenant: optionalTenant(), trace: currentTraceparent(), request: currentRequestId() }).toEqual({ tenant: undefined, trace: undefined, request: undefined });
  });
});
