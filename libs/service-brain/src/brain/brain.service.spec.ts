import { randomUUID } from 'node:crypto';
import { DomainError, ErrorCode } from '@mission/contracts';
import { MissingTenantContextError, runWithTenant } from '@mission/tenant-context';
import { BrainService } from './brain.service';

describe('BrainService.query', () => {
  const brain = new BrainService();

  it('answers a tenant query with the query echoed', async () => {
    await expect(runWithTenant({ tenantId: randomUUID() }, () => brain.query({ q: ' transistors ', k: 3 }))).resolves.toEqual({
      query: 'transistors',
      results: [],
    });
  });

  it('refuses an empty query and an out-of-range k', async () => {
    const tenant = { tenantId: randomUUID() };
    await expect(runWithTenant(tenant, () => brain.query({ q: '   ' }))).rejects.toMatchObject({ code: ErrorCode.ValidationFailed });
    const failure = await runWithTenant(tenant, () => brain.query({ q: 'x', k: 51 })).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(DomainError);
    expect((failure as DomainError).errors?.[0]?.field).toBe('k');
  });

  it('never runs without a tenant', async () => {
    await expect(brain.query({ q: 'x' })).rejects.toBeInstanceOf(MissingTenantContextError);
  });
});
