import { Body, Controller, Get, HttpCode, Inject, Param, Patch, Post } from '@nestjs/common';
import {
  ClientCredentialsView,
  CreateClientSchema,
  CreatedTenantView,
  CreateTenantSchema,
  CreateUserSchema,
  MessageTypes,
  parseOrThrow,
  TenantUsageView,
  TenantView,
  Topics,
  UpdateTenantSchema,
  UserView,
} from '@mission/contracts';
import { hashSecret } from '@mission/crypto';
import type { MessageBus } from '@mission/messaging';
import { runWithTenant } from '@mission/tenant-context';
import { Operator } from '../auth/auth.decorators';
import { Operation } from '../openapi/operation';
import { BUS } from '../gateway.options';

/** Operator API: provisioning tenants, their clients and users, answered by the identity provider. */
@Controller('admin/tenants')
@Operator()
export class AdminController {
  constructor(@Inject(BUS) private readonly bus: MessageBus) {}

  @Post()
  @HttpCode(201)
  @Operation({
    operationId: 'createTenant',
    tag: 'Operator',
    summary: 'Provision a tenant with a machine client holding all six tenant scopes',
    access: 'operator',
    body: { schema: 'CreateTenant', required: true, example: { name: 'Acme', tier: 'business' } },
    success: { status: 201, description: 'The tenant and its client; the secret is shown only here', schema: 'CreatedTenant' },
  })
  create(@Body() body: unknown): Promise<CreatedTenantView> {
    return this.bus.request<CreatedTenantView>(Topics.identityRequests, MessageTypes.tenantCreate, parseOrThrow(CreateTenantSchema, body, 'Tenant'));
  }

  @Get(':id')
  @Operation({
    operationId: 'getTenant',
    tag: 'Operator',
    summary: 'One tenant',
    access: 'operator',
    pathId: 'the tenant id',
    success: { status: 200, description: 'The tenant', schema: 'Tenant' },
    problems: [404],
  })
  get(@Param('id') id: string): Promise<TenantView> {
    return this.bus.request<TenantView>(Topics.identityRequests, MessageTypes.tenantGet, { id });
  }

  @Get(':id/usage')
  @Operation({
    operationId: 'getTenantUsage',
    tag: 'Operator',
    summary: 'What a tenant stores in the Brain, against its storage quota',
    access: 'operator',
    pathId: 'the tenant id',
    success: { status: 200, description: 'Documents and bytes of content, used and allowed', schema: 'TenantUsage' },
    problems: [404],
  })
  async usage(@Param('id') id: string): Promise<TenantUsageView> {
    const tenant = await this.bus.request<TenantView>(Topics.identityRequests, MessageTypes.tenantGet, { id });
    // Asked as the tenant: brain-service reads its statistics under the tenant's row-level security.
    const used = await runWithTenant({ tenantId: tenant.id }, () => this.bus.request<{ documents: number; bytes: number }>(Topics.brainRequests, MessageTypes.brainUsageGet, {}));
    return { tenantId: tenant.id, documents: { used: used.documents, limit: tenant.storage.documents }, bytes: { used: used.bytes, limit: tenant.storage.bytes } };
  }

  @Patch(':id')
  @Operation({
    operationId: 'updateTenant',
    tag: 'Operator',
    summary: "Change a tenant's tier, rpm or (enterprise) storage quota",
    description: 'The new limits apply to the next requests (within 5 s) without new tokens.',
    access: 'operator',
    pathId: 'the tenant id',
    body: { schema: 'UpdateTenant', required: true, example: { tier: 'enterprise', rpm: 5000 } },
    success: { status: 200, description: 'The tenant', schema: 'Tenant' },
    problems: [404],
  })
  update(@Param('id') id: string, @Body() body: unknown): Promise<TenantView> {
    return this.bus.request<TenantView>(Topics.identityRequests, MessageTypes.tenantUpdate, { id, patch: parseOrThrow(UpdateTenantSchema, body, 'Tenant') });
  }

  @Post(':id/clients')
  @HttpCode(201)
  @Operation({
    operationId: 'createClient',
    tag: 'Operator',
    summary: 'Another client of a tenant',
    description: 'Redirect URIs let the client sign users in (authorization_code with PKCE).',
    access: 'operator',
    pathId: 'the tenant id',
    body: { schema: 'CreateClient', required: false, example: { scopes: ['missions:read', 'hits:read'] } },
    success: { status: 201, description: 'The client; the secret is shown only here', schema: 'ClientCredentials' },
    problems: [404],
  })
  createClient(@Param('id') id: string, @Body() body: unknown): Promise<ClientCredentialsView> {
    return this.bus.request<ClientCredentialsView>(Topics.identityRequests, MessageTypes.clientCreate, {
      tenantId: id,
      body: parseOrThrow(CreateClientSchema, body ?? {}, 'Client'),
    });
  }

  @Post(':id/users')
  @HttpCode(201)
  @Operation({
    operationId: 'createUser',
    tag: 'Operator',
    summary: "A tenant's user, who signs in on the identity provider's login page",
    access: 'operator',
    pathId: 'the tenant id',
    body: { schema: 'CreateUser', required: true, example: { username: 'ada', password: 'correct horse battery staple', scopes: ['hits:read', 'hits:approve'] } },
    success: { status: 201, description: 'The user (never the password)', schema: 'User' },
    problems: [404, 409],
  })
  async createUser(@Param('id') id: string, @Body() body: unknown): Promise<UserView> {
    const { password, ...user } = parseOrThrow(CreateUserSchema, body, 'User');
    // Hashed here, so the password never reaches the bus (or a broker's log).
    return this.bus.request<UserView>(Topics.identityRequests, MessageTypes.userCreate, { tenantId: id, ...user, passwordHash: await hashSecret(password) });
  }
}
