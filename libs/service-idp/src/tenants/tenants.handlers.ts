import {
  CreateClientSchema,
  CreateTenantSchema,
  CreateUserCommandSchema,
  MessageTypes,
  parseOrThrow,
  ResourceIdSchema,
  TenantSubresourceCommandSchema,
  UpdateTenantCommandSchema,
  UpdateTenantSchema,
} from '@mission/contracts';
import { RequestHandler } from '@mission/messaging';
import { TenantsService } from './tenants.service';

/** Bus requests of the operator API → TenantsService calls. Bodies are validated again here: the bus is a trust boundary too. */
export function tenantRequestHandlers(tenants: TenantsService): Record<string, RequestHandler> {
  return {
    [MessageTypes.tenantCreate]: async (message) => tenants.create(parseOrThrow(CreateTenantSchema, message.payload, 'Tenant')),
    [MessageTypes.tenantGet]: async (message) => tenants.get(parseOrThrow(ResourceIdSchema, message.payload).id),
    [MessageTypes.tenantUpdate]: async (message) => {
      const { id, patch } = parseOrThrow(UpdateTenantCommandSchema, message.payload);
      return tenants.update(id, parseOrThrow(UpdateTenantSchema, patch, 'Tenant'));
    },
    [MessageTypes.clientCreate]: async (message) => {
      const { tenantId, body } = parseOrThrow(TenantSubresourceCommandSchema, message.payload);
      return tenants.createClient(tenantId, parseOrThrow(CreateClientSchema, body ?? {}, 'Client'));
    },
    [MessageTypes.userCreate]: async (message) => {
      const { tenantId, ...user } = parseOrThrow(CreateUserCommandSchema, message.payload, 'User');
      return tenants.createUser(tenantId, user);
    },
  };
}
