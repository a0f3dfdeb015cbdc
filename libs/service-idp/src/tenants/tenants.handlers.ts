import { CreateClientSchema, Messages, parseOrThrow, type SigningKeyRotationView, Topics, UpdateTenantSchema } from '@mission/contracts';
import { on, RequestHandler, requestHandlers } from '@mission/messaging';
import { TenantsService } from './tenants.service';

/**
 * Bus requests of the operator API → TenantsService calls, and the signing key's rotation. Payloads
 * are checked against their schemas again here (the bus is a trust boundary too), and so are the
 * bodies they carry.
 */
export function identityRequestHandlers(tenants: TenantsService, rotateSigningKey: () => Promise<SigningKeyRotationView>): Record<string, RequestHandler> {
  return requestHandlers(Topics.identityRequests, [
    on(Messages.tenantCreate, (tenant) => tenants.create(tenant)),
    on(Messages.tenantGet, ({ id }) => tenants.get(id)),
    on(Messages.tenantUpdate, ({ id, patch }) => tenants.update(id, parseOrThrow(UpdateTenantSchema, patch, 'Tenant'))),
    on(Messages.clientCreate, ({ tenantId, body }) => tenants.createClient(tenantId, parseOrThrow(CreateClientSchema, body ?? {}, 'Client'))),
    on(Messages.usersUnknown, ({ tenantId, usernames }) => tenants.unknownUsers(tenantId, usernames)),
    on(Messages.userCreate, ({ tenantId, ...user }) => tenants.createUser(tenantId, user)),
    on(Messages.signingKeyRotate, () => rotateSigningKey()),
  ]);
}
