import { Body, Controller, Get, HttpCode, Inject, Param, Post } from '@nestjs/common';
import { CreatedTenantView, CreateTenantSchema, MessageTypes, parseOrThrow, TenantView, Topics } from '@mission/contracts';
import type { MessageBus } from '@mission/messaging';
import { Operator } from '../auth/auth.decorators';
import { BUS } from '../gateway.options';

/** Operator API: provisioning tenants, answered by the identity provider. */
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
}
