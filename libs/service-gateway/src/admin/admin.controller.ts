import { Body, Controller, Get, HttpCode, Inject, Param, Patch, Post } from '@nestjs/common';
import {
  ClientCredentialsView,
  CreateClientSchema,
  CreatedTenantView,
  CreateTenantSchema,
  CreateUserSchema,
  MessageTypes,
  parseOrThrow,
  TenantView,
  Topics,
  UpdateTenantSchema,
  UserView,
} from '@mission/contracts';
import { hashSecret } from '@mission/crypto';
import type { MessageBus } from '@mission/messaging';
import { Operator } from '../auth/auth.decorators';
import { BUS } from '../gateway.options';

/** Operator API: provisioning tenants, their clients and users, answered by the identity provider. */
@Controller('admin/tenants')
@Operator()
export class AdminController {
  constructor(@Inject(BUS) private readonly bus: MessageBus) {}

  @Post()
  @HttpCode(201)
  create(@Body() body: unknown): Promise<CreatedTenantView> {
    return this.bus.request<CreatedTenantView>(Topics.identityRequests, MessageTypes.tenantCreate, parseOrThrow(CreateTenantSchema, body, 'Tenant'));
  }

  @Get(':id')
  get(@Param('id') id: string): Promise<TenantView> {
    return this.bus.request<TenantView>(Topics.identityRequests, MessageTypes.tenantGet, { id });
  }

  @Patch(':id')
  update(@Param('id') id: string, @Body() body: unknown): Promise<TenantView> {
    return this.bus.request<TenantView>(Topics.identityRequests, MessageTypes.tenantUpdate, { id, patch: parseOrThrow(UpdateTenantSchema, body, 'Tenant') });
  }

  @Post(':id/clients')
  @HttpCode(201)
  createClient(@Param('id') id: string, @Body() body: unknown): Promise<ClientCredentialsView> {
    return this.bus.request<ClientCredentialsView>(Topics.identityRequests, MessageTypes.clientCreate, {
      tenantId: id,
      body: parseOrThrow(CreateClientSchema, body ?? {}, 'Client'),
    });
  }

  @Post(':id/users')
  @HttpCode(201)
  async createUser(@Param('id') id: string, @Body() body: unknown): Promise<UserView> {
    const { password, ...user } = parseOrThrow(CreateUserSchema, body, 'User');
    // Hashed here, so the password never reaches the bus (or a broker's log).
    return this.bus.request<UserView>(Topics.identityRequests, MessageTypes.userCreate, { tenantId: id, ...user, passwordHash: await hashSecret(password) });
  }
}
