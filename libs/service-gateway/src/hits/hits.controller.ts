import { Body, Controller, Get, HttpCode, Param, Post, Query } from '@nestjs/common';
import { HitView, Page, Scopes } from '@mission/contracts';
import { Caller } from '../auth/auth.decorators';
import type { Authenticated } from '../auth/authenticated';
import { Operation } from '../openapi/operation';
import { HitOperations } from '../operations/hits.operations';

/** Human approval tasks of the caller's tenant. */
@Controller('api/hit')
export class HitsController {
  constructor(private readonly hits: HitOperations) {}

  /** Pending items, oldest first. */
  @Get()
  @Operation({
    operationId: 'listPendingHits',
    tag: 'HIT items',
    summary: 'Pending HIT items, oldest first',
    access: { scopes: [Scopes.hitsRead] },
    query: 'page',
    success: { status: 200, description: 'One page of pending items', schema: 'HitItemPage' },
  })
  list(@Query() query: Record<string, unknown>): Promise<Page<HitView>> {
    return this.hits.listPending(query);
  }

  @Get(':id')
  @Operation({
    operationId: 'getHit',
    tag: 'HIT items',
    summary: 'One HIT item, pending or decided',
    access: { scopes: [Scopes.hitsRead] },
    pathId: 'the HIT item id',
    success: { status: 200, description: 'The item', schema: 'HitItem' },
    problems: [404],
  })
  get(@Param('id') id: string): Promise<HitView> {
    return this.hits.get(id);
  }

  @Post(':id/approve')
  @HttpCode(200)
  @Operation({
    operationId: 'approveHit',
    tag: 'HIT items',
    summary: 'Approve a pending item; its mission continues',
    access: { scopes: [Scopes.hitsApprove] },
    pathId: 'the HIT item id',
    body: { schema: 'HitDecision', required: false, example: { comment: 'Go' } },
    success: { status: 200, description: 'The item, approved, with decidedAt and decidedBy (the token subject)', schema: 'HitItem' },
    problems: [404, 409],
  })
  approve(@Param('id') id: string, @Body() body: unknown, @Caller() caller: Authenticated): Promise<HitView> {
    return this.hits.decide(id, 'approved', body, caller.subject);
  }

  @Post(':id/reject')
  @HttpCode(200)
  @Operation({
    operationId: 'rejectHit',
    tag: 'HIT items',
    summary: 'Reject a pending item; its mission ends rejected',
    access: { scopes: [Scopes.hitsApprove] },
    pathId: 'the HIT item id',
    body: { schema: 'HitDecision', required: false, example: { comment: 'Numbers are off' } },
    success: { status: 200, description: 'The item, rejected', schema: 'HitItem' },
    problems: [404, 409],
  })
  reject(@Param('id') id: string, @Body() body: unknown, @Caller() caller: Authenticated): Promise<HitView> {
    return this.hits.decide(id, 'rejected', body, caller.subject);
  }
}
