import { Inject, Injectable } from '@nestjs/common';
import {
  DomainError,
  ErrorCode,
  IDEMPOTENCY_KEY_PATTERN,
  ListMissionsQuerySchema,
  MessageTypes,
  MissionView,
  Page,
  parseOrThrow,
  SubmitMissionSchema,
  Topics,
} from '@mission/contracts';
import type { MessageBus } from '@mission/messaging';
import { BUS } from '../gateway.options';

function idempotencyKeyOf(key: string | undefined): string | undefined {
  if (key === undefined) return undefined;
  if (!IDEMPOTENCY_KEY_PATTERN.test(key)) {
    throw new DomainError(ErrorCode.ValidationFailed, 'The Idempotency-Key header is invalid', [
      { field: 'Idempotency-Key', message: 'must be 1 to 255 visible ASCII characters' },
    ]);
  }
  return key;
}

/**
 * The mission operations of the caller's tenant (taken from the tenant context), validated here
 * and answered by mission-service over the bus. REST routes and MCP tools both call these.
 */
@Injectable()
export class MissionOperations {
  constructor(@Inject(BUS) private readonly bus: MessageBus) {}

  /**
   * Validated here, but the body goes to mission-service as the client sent it: that is what an
   * Idempotency-Key's fingerprint is taken of, so a body that differs only in what validation
   * normalises (whitespace around a title, say) is another request (422), not a repeat.
   */
  submit(body: unknown, idempotencyKey?: string): Promise<MissionView> {
    parseOrThrow(SubmitMissionSchema, body, 'Mission');
    const key = idempotencyKeyOf(idempotencyKey);
    return this.bus.request<MissionView>(Topics.missionRequests, MessageTypes.missionSubmit, { mission: body, ...(key ? { idempotencyKey: key } : {}) });
  }

  /** Newest first, optionally of one status. */
  list(query: unknown): Promise<Page<MissionView>> {
    return this.bus.request<Page<MissionView>>(Topics.missionRequests, MessageTypes.missionList, parseOrThrow(ListMissionsQuerySchema, query, 'Query'));
  }

  get(id: unknown): Promise<MissionView> {
    return this.bus.request<MissionView>(Topics.missionRequests, MessageTypes.missionGet, { id });
  }

  cancel(id: unknown): Promise<MissionView> {
    return this.bus.request<MissionView>(Topics.missionRequests, MessageTypes.missionCancel, { id });
  }
}
