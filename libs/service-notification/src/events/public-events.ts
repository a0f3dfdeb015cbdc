import {
  EventTypes,
  type HitCreatedEvent,
  type HitDecidedEvent,
  type HitExpiredEvent,
  type MissionAwaitingApprovalEvent,
  type MissionCompletedEvent,
  type TenantEventType,
} from '@mission/contracts';

/** A platform event as the tenant's log records it: its public type, its mission, when it happened, its `data`. */
export interface LoggedEvent {
  readonly type: TenantEventType;
  readonly missionId: string;
  readonly occurredAt: string;
  readonly data: Readonly<Record<string, unknown>>;
}

/*
 * What a client sees of each service event: ids and outcomes, never what people wrote (a decision's
 * comment stays in the item, read with the item's own scope).
 */

export function missionAwaitingApproval(event: MissionAwaitingApprovalEvent): LoggedEvent {
  return {
    type: EventTypes.missionAwaitingApproval,
    missionId: event.missionId,
    occurredAt: event.at,
    data: { missionId: event.missionId, hitId: event.hitId, stepIndex: event.stepIndex },
  };
}

export function missionCompleted(event: MissionCompletedEvent): LoggedEvent {
  return { type: EventTypes.missionCompleted, missionId: event.missionId, occurredAt: event.completedAt, data: { missionId: event.missionId, status: event.status } };
}

export function hitCreated(event: HitCreatedEvent): LoggedEvent {
  return {
    type: EventTypes.hitCreated,
    missionId: event.missionId,
    occurredAt: event.createdAt,
    data: {
      hitId: event.hitId,
      missionId: event.missionId,
      ...(event.expiresAt !== undefined ? { expiresAt: event.expiresAt } : {}),
      ...(event.assignees !== undefined ? { assignees: [...event.assignees] } : {}),
    },
  };
}

export function hitExpired(event: HitExpiredEvent): LoggedEvent {
  return { type: EventTypes.hitExpired, missionId: event.missionId, occurredAt: event.expiredAt, data: { hitId: event.hitId, missionId: event.missionId } };
}

export function hitDecided(event: HitDecidedEvent): LoggedEvent {
  return {
    type: EventTypes.hitDecided,
    missionId: event.missionId,
    occurredAt: event.decidedAt,
    data: { hitId: event.hitId, missionId: event.missionId, decision: event.decision, decidedBy: event.decidedBy },
  };
}
