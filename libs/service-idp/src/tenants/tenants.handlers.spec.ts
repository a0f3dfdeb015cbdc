import { CreateTenantRequest, DomainError, ErrorCode, Messages, TenantView } from '@mission/contracts';
import { IncomingMessage } from '@mission/messaging';
import { identityRequestHandlers } from './tenants.handlers';
import { TenantsService } from './tenants.service';

function message(type: string, payload: unknown): IncomingMessage {
  return { id: 'm1', topic: 'identity.requests.v1', type, key: 'k', payload, headers: {}, attempt: 1 };
}

async function failureOf(promise: Promise<unknown>): Promise<DomainError> {
  const error = await promise.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  if (!(error instanceof DomainError)) throw new Error(`expected a DomainError, got ${String(error)}`);
  return error;
}

describe('identity request handlers', () => {
  const calls: Array<[string, unknown]> = [];
  const tenant: TenantView = {
    id: '0b7c4f5e-8d1a-4c3b-9e2f-6a5d4c3b2a19',
    name: 'Acme',
    tier: 'enterprise',
    rpm: 9000,
    storage: { documents: 10, bytes: 1000 },
    createdAt: '2026-11-26T10:00:00.000Z',
  };
  const service = {
    create: async (request: CreateTenantRequest) => {
      calls.push(['create', request]);
      return { ...tenant, client: { clientId: 'c', clientSecret: 's', scopes: ['missions:read'] } };
    },
    get: async (id: string) => {
      calls.push(['get', id]);
      return id === 'broken' ? { ...tenant, tier: 'gold' } : tenant;
    },
  } as unknown as TenantsService;
  const handlers = identityRequestHandlers(service, async () => ({ kid: 'k', state: 'published', activatesAt: '2026-11-26T10:00:00.000Z' }));

  beforeEach(() => {
    calls.length = 0;
  });

  it('passes a valid tenant body to the service, trimmed', async () => {
    await handlers[Messages.tenantCreate.type](message(Messages.tenantCreate.type, { name: ' Acme ', tier: 'enterprise', rpm: 9000 }));
    expect(calls).toEqual([['create', { name: 'Acme', tier: 'enterprise', rpm: 9000 }]]);
  });

  it('refuses an invalid body with each field named, before the service', async () => {
    const error = await failureOf(handlers[Messages.tenantCreate.type](message(Messages.tenantCreate.type, { name: '', tier: 'gold', extra: 1 })));
    expect(error.code).toBe(ErrorCode.ValidationFailed);
    expect(error.errors?.map((e) => e.field).sort()).toEqual(['extra', 'name', 'tier']);
    const enterprise = await failureOf(handlers[Messages.tenantCreate.type](message(Messages.tenantCreate.type, { name: 'A', tier: 'enterprise' })));
    expect(enterprise.errors).toEqual([{ field: 'rpm', message: 'rpm is required for the enterprise tier' }]);
    expect(calls).toEqual([]);
  });

  it('looks a tenant up by the id in the payload', async () => {
    await handlers[Messages.tenantGet.type](message(Messages.tenantGet.type, { id: 'whatever' }));
    expect(calls).toEqual([['get', 'whatever']]);
    const error = await failureOf(handlers[Messages.tenantGet.type](message(Messages.tenantGet.type, { tenant: 'x' })));
    expect(error.code).toBe(ErrorCode.ValidationFailed);
  });

  it("refuses to send a reply its callers would refuse: a service defect, not the caller's", async () => {
    const reply = handlers[Messages.tenantGet.type](message(Messages.tenantGet.type, { id: 'broken' }));
    await expect(reply).rejects.toThrow('The reply to identity.tenant.get does not match its schema (tier: ');
    await expect(reply).rejects.not.toBeInstanceOf(DomainError);
  });

  it('answers every identity request of the catalogue, and nothing else', () => {
    const identityMessages = Object.values(Messages).filter((definition) => definition.topic === 'identity.requests.v1');
    expect(Object.keys(handlers).sort()).toEqual(identityMessages.map((definition) => definition.type).sort());
  });
});
