import { z } from 'zod';
import { ErrorBody, isErrorBody } from './errors';
import { MISSION_STATUSES } from './missions';
import { TenantEventSchema } from './tenant-events';
import { EventTypes } from './topics';

/*
 * The payloads of the platform's events, by topic and message type. Their types are derived from
 * the schemas, so neither can change without the other, and a consumer checks each payload against
 * its schema before handling it (eventHandlers in @mission/messaging). The objects accept fields
 * they do not know, and check shapes and types rather than the limits a producer puts on its input
 * (a comment's length): during a rolling upgrade a newer producer may add a field or raise a limit,
 * and an older consumer must still handle the event rather than dead-letter it.
 */

const timestamp = z.iso.datetime({ offset: true });

/**
 * `mission.queued`: a submitted mission waits for mission-service's runner. `firstStepSent`: its
 * first step's request left with the submit (the runner only marks the mission running). Absent
 * (an earlier version's event), the runner looks at the mission itself.
 */
export const MissionQueuedEventSchema = z.object({ missionId: z.uuid(), firstStepSent: z.boolean().optional() });
export type MissionQueuedEvent = Readonly<z.output<typeof MissionQueuedEventSchema>>;

/** `mission.cancelled`: approval items still waiting for this mission are closed. */
export const MissionCancelledEventSchema = z.object({ missionId: z.uuid() });
export type MissionCancelledEvent = Readonly<z.output<typeof MissionCancelledEventSchema>>;

/** `mission.completed`: the mission reached a final status. */
export const MissionCompletedEventSchema = z.object({ missionId: z.uuid(), status: z.enum(MISSION_STATUSES), completedAt: timestamp });
export type MissionCompletedEvent = Readonly<z.output<typeof MissionCompletedEventSchema>>;

/** `mission.awaiting_approval`: the mission parked on its approval step `stepIndex`, waiting for item `hitId`. */
export const MissionAwaitingApprovalEventSchema = z.object({ missionId: z.uuid(), hitId: z.uuid(), stepIndex: z.int().min(0), at: timestamp });
export type MissionAwaitingApprovalEvent = Readonly<z.output<typeof MissionAwaitingApprovalEventSchema>>;

/** `hit.created` (key `tenantId:missionId`): an approval item was created for a mission's step. */
export const HitCreatedEventSchema = z.object({
  hitId: z.uuid(),
  missionId: z.uuid(),
  stepIndex: z.int().min(0),
  createdAt: timestamp,
  expiresAt: timestamp.optional(),
  assignees: z.array(z.string()).optional(),
});
export type HitCreatedEvent = Readonly<z.output<typeof HitCreatedEventSchema>>;

/** `hit.decided` (key `tenantId:missionId`): a person decided a mission's approval item, as `hit.decide` accepted it. */
export const HitDecidedEventSchema = z.object({
  hitId: z.uuid(),
  missionId: z.uuid(),
  stepIndex: z.int().min(0),
  decision: z.enum(['approved', 'rejected']),
  decidedBy: z.string().min(1),
  decidedAt: timestamp,
  comment: z.string().optional(),
});
export type HitDecidedEvent = Readonly<z.output<typeof HitDecidedEventSchema>>;

/**
 * `hit.expired` (key `tenantId:missionId`): a mission's approval item passed its deadline
 * undecided; emitted once, by whichever of the deadline sweep and a late decision saw it first.
 */
export const HitExpiredEventSchema = z.object({ hitId: z.uuid(), missionId: z.uuid(), stepIndex: z.int().min(0), expiredAt: timestamp });
export type HitExpiredEvent = Readonly<z.output<typeof HitExpiredEventSchema>>;

/** The events of `mission.events.v1`, by message type. */
export const MissionEventSchemas = {
  [EventTypes.missionQueued]: MissionQueuedEventSchema,
  [EventTypes.missionCancelled]: MissionCancelledEventSchema,
  [EventTypes.missionCompleted]: MissionCompletedEventSchema,
  [EventTypes.missionAwaitingApproval]: MissionAwaitingApprovalEventSchema,
} as const;

/** The events of `hit.events.v1`, by message type. */
export const HitEventSchemas = {
  [EventTypes.hitCreated]: HitCreatedEventSchema,
  [EventTypes.hitDecided]: HitDecidedEventSchema,
  [EventTypes.hitExpired]: HitExpiredEventSchema,
} as const;

/** The events of `notify.events.v1`: each event a tenant's log recorded, as clients see it. */
export const NotifyEventSchemas = {
  [EventTypes.tenantEventRecorded]: TenantEventSchema,
} as const;

/**
 * What `mission.step-results.v1` carries: the replies (message type `reply`) to the requests
 * mission steps send, re-read as events, in the bus's reply envelope. What `data` holds depends on
 * the request (a `brain.query` result, a `hit.create` item), which only the step it answers tells;
 * an error is one a requester would read (isErrorBody: a code it knows).
 */
export const StepResultSchema = z.discriminatedUnion('ok', [
  z.object({ ok: z.literal(true), data: z.unknown() }),
  z.object({ ok: z.literal(false), error: z.custom<ErrorBody>(isErrorBody) }),
]);
