import { Body, Controller, Get, HttpCode, Inject, Param, Post, Query } from '@nestjs/common';
import { DecideHitBodySchema, HitDecision, HitView, MessageTypes, Page, PageQuerySchema, parseOrThrow, Scopes, Topics } from '@mission/contracts';
import type { MessageBus } from '@mission/messaging';
import { Caller, TenantScopes } from '../auth/auth.decorators';
import type { Authenticated } from '../auth/authenticated';
import { BUS } from '../gateway.options';

/** Human approval tasks of the caller's tenant. */
@Controller('api/hit')
export class HitsController {
  constructor(@Inject(BUS) private readonly bus: MessageBus) {}

  /** Pending items, oldest first. */
  @Get()
  @TenantScopes(Scopes.hitsRead)
  list(@Query() query: Record<string, unknown>): Promise<Page<HitView>> {
    return this.bus.request<Page<HitView>>(Topics.hitRequests, MessageTypes.hitListPending, parseOrThrow(PageQuerySchema, query, 'Query'));
  }

  @Get(':id')
  @TenantScopes(Scopes.hitsRead)
  get(@Param('id') id: string): Promise<HitView> {
    return this.bus.request<HitView>(Topics.hitRequests, MessageTypes.hitGet, { id });
  }

  @Post(':id/approve')
  @HttpCode(200)
  @TenantScopes(Scopes.hitsApprove)
  approve(@Param('id') id: string, @Body() body: unknown, @Caller() caller: Authenticated): Promise<HitView> {
    return this.decide(id, 'approved', body, caller);
  }

  @Post(':id/reject')
  @HttpCode(200)
  @TenantScopes(Scopes.hitsApprove)
  reject(@Param('id') id: string, @Body() body: unknown, @Caller() caller: Authenticated): Promise<HitView> {
    return this.decide(id, 'rejected', body, caller);
  }

  private decide(id: string, decision: HitDecision, body: unknown, caller: Authenticated): Promise<HitView> {
    const { comment } = parseOrThrow(DecideHitBodySchema, body ?? {}, 'Decision');
    return this.bus.request<HitView>(Topics.hitRequests, MessageTypes.hitDecide, {
      id,
      decision,
      decidedBy: caller.subject,
      ...(comment !== undefined ? { comment } : {}),
    });
  }
}
