import { CreateTenantRequest, DomainError, ErrorCode, MessageTypes } from '@mission/contracts';
import { IncomingMessage } from '@mission/messaging';
import { tenantRequestHandlers } from './tenants.handlers';
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

describe('tenant request handlers', () => {
  const calls: Array<[string, unknown]> = [];
  const service = {
    create: async (request: CreateTenantRequest) => {
      calls.push(['create', request]);
      return { created: true };
    },
    get: async (id: string) => {
      calls.push(['get', id]);
      return { id };
    },
  } as unknown as TenantsService;
  const handlers = tenantRequestHandlers(service);

  beforeEach(() => {
    calls.length = 0;
  });

  it('passes a valid tenant body to the service, trimmed', async () => {
    await handlers[MessageTypes.tenantCreate](message(MessageTypes.tenantCreate, { name: ' Acme ', tier: 'enterprise', rpm: 9000 }));
    expect(calls).toEqual([['create', { name: 'Acme', tier: 'enterprise', rpm: 9000 }]]);
  });

  it('refuses an invalid body with each field named, before the service', async () => {
    const error = await failureOf(handlers[MessageTypes.tenantCreate](message(MessageTypes.tenantCreate, { name: '', tier: 'gold', extra: 1 })));
    expect(error.code).toBe(ErrorCode.ValidationFailed);
    expect(error.errors?.map((e) => e.field).sort()).toEqual(['extra', 'name', 'tier']);
    const enterprise = await failureOf(handlers[MessageTypes.tenantCreate](message(MessageTypes.tenantCreate, { name: 'A', tier: 'enterprise' })));
    expect(enterprise.errors).toEqual([{ field: 'rpm', message: 'rpm is required for the enterprise tier' }]);
    expect(calls).toEqual([]);
  });

  it('looks a tenant up by the id in the payload', async () => {
    await handlers[MessageTypes.tenantGet](message(MessageTypes.tenantGet, { id: 'whatever' }));
    expect(calls).toEqual([['get', 'whatever']]);
    const error = await failureOf(handlers[MessageTypes.tenantGet](message(MessageTypes.tenantGet, { tenant: 'x' })));
    expect(error.code).toBe(ErrorCode.ValidationFailed);
  });
});
