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
  scopesMissionNeeds,
  SubmitMissionSchema,
  Topics,
} from '@mission/contracts';
import type { MessageBus } from '@mission/messaging';
import { currentTenant } from '@mission/tenant-context';
import { insufficientScopeProblem } from '../auth/auth.guard';
import { BUS, GATEWAY_OPTIONS, GatewayOptions } from '../gateway.options';

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
  constructor(
    @Inject(BUS) private readonly bus: MessageBus,
    @Inject(GATEWAY_OPTIONS) private readonly options: GatewayOptions,
  ) {}

  /**
   * Validated here, but the body goes to mission-service as the client sent it: that is what an
   * Idempotency-Key's fingerprint is taken of, so a body that differs only in what validation
   * normalises (whitespace around a title, say) is another request (422), not a repeat.
   *
   * A mission's steps act with its submitter's authority: a step that reads the Brain needs
   * `brain:read` (403 `insufficient_scope` naming it), and the caller's scopes travel with the
   * command so that mission-service records what its steps may do.
   */
  submit(body: unknown, idempotencyKey?: string): Promise<MissionView> {
    const mission = parseOrThrow(SubmitMissionSchema, body, 'Mission');
    const key = idempotencyKeyOf(idempotencyKey);
    const scopes = [...(currentTenant().scopes ?? [])];
    const missing = scopesMissionNeeds(mission).filter((scope) => !scopes.includes(scope));
    if (missing.length > 0) throw insufficientScopeProblem(this.options.publicUrl, missing);
    return this.bus.request<MissionView>(Topics.missionRequests, MessageTypes.missionSubmit, { mission: body, scopes, ...(key ? { idempotencyKey: key } : {}) });
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
