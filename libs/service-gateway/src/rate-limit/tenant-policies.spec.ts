import { randomUUID } from 'node:crypto';
import { DomainError, ErrorCode, TenantView } from '@mission/contracts';
import { PolicyLookupWarning, TenantPolicies } from './tenant-policies';

interface PendingLookup {
  readonly tenantId: string;
  resolve(view: Partial<TenantView>): void;
  reject(error: unknown): void;
}

function setUp() {
  let now = 0;
  const lookups: PendingLookup[] = [];
  const warnings: PolicyLookupWarning[] = [];
  const policies = new TenantPolicies(
    (tenantId) =>
      new Promise<TenantView>((resolve, reject) => {
        lookups.push({
          tenantId,
          resolve: (view) => resolve({ id: tenantId, name: 'T', createdAt: '', tier: 'business', rpm: 500, storage: { documents: 10_000, bytes: 1_073_741_824 }, ...view }),
          reject,
        });
      }),
    (warning) => warnings.push(warning),
    { now: () => now },
  );
  const flush = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
  return {
    policies,
    lookups,
    warnings,
    flush,
    advance: (ms: number) => {
      now += ms;
    },
  };
}

describe('tenant policies', () => {
  const tenant = randomUUID();
  let setup: ReturnType<typeof setUp>;

  beforeEach(() => {
    setup = setUp();
  });

  afterEach(() => setup.policies.close());

  it('asks the identity provider once for concurrent first requests of a tenant', async () => {
    const { policies, lookups, flush } = setup;
    const first = policies.policyOf(tenant);
    const second = policies.policyOf(tenant);
    await flush();
    expect(lookups.map((lookup) => lookup.tenantId)).toEqual([tenant]);
    lookups[0]?.resolve({ tier: 'starter', rpm: 100 });
    await expect(Promise.all([first, second])).resolves.toEqual([
      { name: 'starter', limit: 100 },
      { name: 'starter', limit: 100 },
    ]);
  });

  it('serves from the cache without waiting, refreshing in the background after 2 s', async () => {
    const { policies, lookups, flush, advance } = setup;
    const first = policies.policyOf(tenant);
    await flush();
    lookups[0]?.resolve({});
    await first;

    advance(1_999);
    await expect(policies.policyOf(tenant)).resolves.toEqual({ name: 'business', limit: 500 });
    expect(lookups).toHaveLength(1);

    advance(1);
    await expect(policies.policyOf(tenant)).resolves.toEqual({ name: 'business', limit: 500 });
    await expect(policies.policyOf(tenant)).resolves.toEqual({ name: 'business', limit: 500 });
    expect(lookups).toHaveLength(2);
    lookups[1]?.resolve({ tier: 'enterprise', rpm: 42 });
    await flush();
    await expect(policies.policyOf(tenant)).resolves.toEqual({ name: 'enterprise', limit: 42 });
  });

  it('never serves an entry older than 5 s while the identity provider answers: a change applies within 5 s', async () => {
    const { policies, lookups, flush, advance } = setup;
    const first = policies.policyOf(tenant);
    await flush();
    lookups[0]?.resolve({});
    await first;

    advance(5_000);
    const waiting = policies.policyOf(tenant);
    let settled = false;
    void waiting.then(() => (settled = true));
    await flush();
    expect(settled).toBe(false);
    lookups[1]?.resolve({ tier: 'professional', rpm: 2000 });
    await expect(waiting).resolves.toEqual({ name: 'professional', limit: 2000 });
  });

  it('keeps the last known policy while the identity provider cannot answer, and says so', async () => {
    const { policies, lookups, warnings, flush, advance } = setup;
    const first = policies.policyOf(tenant);
    await flush();
    lookups[0]?.resolve({});
    await first;

    advance(6_000);
    const during = policies.policyOf(tenant);
    await flush();
    lookups[1]?.reject(new DomainError(ErrorCode.DependencyUnavailable, 'No answer'));
    await expect(during).resolves.toEqual({ name: 'business', limit: 500 });
    expect(warnings).toEqual([{ tenantId: tenant, error: expect.any(DomainError), ageMs: 6_000 }]);

    // Within a second of a failure, requests do not wait on another lookup.
    advance(500);
    await expect(policies.policyOf(tenant)).resolves.toEqual({ name: 'business', limit: 500 });
    expect(lookups).toHaveLength(2);

    // Past staleIfError (60 s) the failure reaches the request.
    advance(60_000);
    const late = policies.policyOf(tenant);
    await flush();
    lookups[2]?.reject(new DomainError(ErrorCode.DependencyUnavailable, 'No answer'));
    await expect(late).rejects.toMatchObject({ code: ErrorCode.DependencyUnavailable });
  });

  it('fails a first request when the identity provider cannot answer', async () => {
    const { policies, lookups, flush } = setup;
    const first = policies.policyOf(tenant);
    await flush();
    lookups[0]?.reject(new DomainError(ErrorCode.DependencyUnavailable, 'No answer'));
    await expect(first).rejects.toMatchObject({ code: ErrorCode.DependencyUnavailable });
  });

  it('answers null for a tenant the identity provider does not know, and remembers it', async () => {
    const { policies, lookups, flush } = setup;
    const first = policies.policyOf(tenant);
    await flush();
    lookups[0]?.reject(DomainError.notFound('Tenant'));
    await expect(first).resolves.toBeNull();
    await expect(policies.policyOf(tenant)).resolves.toBeNull();
    expect(lookups).toHaveLength(1);
  });
});
