import { Inject, Injectable } from '@nestjs/common';
import { DecideHitBodySchema, HitDecision, HitView, MessageTypes, Page, PageQuerySchema, parseOrThrow, Topics } from '@mission/contracts';
import type { MessageBus } from '@mission/messaging';
import { BUS } from '../gateway.options';

/** Human approval tasks of the caller's tenant, answered by hit-service. REST routes and MCP tools both call these. */
@Injectable()
export class HitOperations {
  constructor(@Inject(BUS) private readonly bus: MessageBus) {}

  /** Pending items, oldest first. */
  listPending(query: unknown): Promise<Page<HitView>> {
    return this.bus.request<Page<HitView>>(Topics.hitRequests, MessageTypes.hitListPending, parseOrThrow(PageQuerySchema, query, 'Query'));
  }

  get(id: unknown): Promise<HitView> {
    return this.bus.request<HitView>(Topics.hitRequests, MessageTypes.hitGet, { id });
  }

  /** Records the decision of `decidedBy` (the token's subject); 409 once the item is decided. */
  decide(id: unknown, decision: HitDecision, body: unknown, decidedBy: string): Promise<HitView> {
    const { comment } = parseOrThrow(DecideHitBodySchema, body ?? {}, 'Decision');
    return this.bus.request<HitView>(Topics.hitRequests, MessageTypes.hitDecide, {
      id,
      decision,
      decidedBy,
      ...(comment !== undefined ? { comment } : {}),
    });
  }
}
