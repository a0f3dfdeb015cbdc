import { CreateTenantSchema, MessageTypes, parseOrThrow, ResourceIdSchema } from '@mission/contracts';
import { RequestHandler } from '@mission/messaging';
import { TenantsService } from './tenants.service';

/** Bus requests of the operator API → TenantsService calls. */
export function tenantRequestHandlers(tenants: TenantsService): Record<string, RequestHandler> {
  return {
    [MessageTypes.tenantCreate]: async (message) => tenants.create(parseOrThrow(CreateTenantSchema, message.payload, 'Tenant')),
    [MessageTypes.tenantGet]: async (message) => tenants.get(parseOrThrow(ResourceIdSchema, message.payload).id),
  };
}
