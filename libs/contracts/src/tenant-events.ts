import { z } from 'zod';
import { DomainError, ErrorCode } from './errors';
import { MISSION_STATUSES } from './missions';
import { Scope } from './scopes';

/*
 * The events a tenant's clients see (API contract, "Events"): every state change they care about,
 * kept per tenant in notification-service's log, in the order it happened there. An event carries
 * ids and outcomes (an item's deadline and its assignees' usernames included), never what people
 * wrote: a client reads the resource itself with its own scopes.
 */

/** The public event types, and the scope a token needs to see each. */
export const TENANT_EVENT_TYPES = ['mission.awaiting_approval', 'mission.completed', 'hit.created', 'hit.decided', 'hit.expired'] as const;
export type TenantEventType = (typeof TENANT_EVENT_TYPES)[number];

export const TENANT_EVENT_SCOPES: Readonly<Record<TenantEventType, Scope>> = {
  'mission.awaiting_approval': 'missions:read',
  'mission.completed': 'missions:read',
  'hit.created': 'hits:read',
  'hit.decided': 'hits:read',
  'hit.expired': 'hits:read',
};

/** The types a token with `scopes` may read. */
export function readableEventTypes(scopes: readonly string[]): TenantEventType[] {
  return TENANT_EVENT_TYPES.filter((type) => scopes.includes(TENANT_EVENT_SCOPES[type]));
}

/** Each type's `data`. */
export const TenantEventDataSchemas = {
  'mission.awaiting_approval': z.strictObject({ missionId: z.uuid(), hitId: z.uuid(), stepIndex: z.int().min(0) }),
  'mission.completed': z.strictObject({ missionId: z.uuid(), status: z.enum(MISSION_STATUSES) }),
  'hit.created': z.strictObject({ hitId: z.uuid(), missionId: z.uuid(), expiresAt: z.iso.datetime().optional(), assignees: z.array(z.string()).optional() }),
  'hit.decided': z.strictObject({ hitId: z.uuid(), missionId: z.uuid(), decision: z.enum(['approved', 'rejected']), decidedBy: z.string() }),
  'hit.expired': z.strictObject({ hitId: z.uuid(), missionId: z.uuid() }),
} as const satisfies Record<TenantEventType, z.ZodType>;

/**
 * An event's id: `evt_<position>_<12 hex>`. The position orders the tenant's log (1, 2, 3, … with
 * no gaps); the random part makes ids unique across tenants (a receiver serving several tenants
 * may deduplicate by id) and lets a position be checked against the event it names.
 */
const EVENT_ID = /^evt_([1-9]\d{0,17})_([0-9a-f]{12})$/;

export function formatEventId(position: number | bigint | string, nonce: string): string {
  return `evt_${String(position)}_${nonce}`;
}

/** The position an event id names, or undefined when it is not an id this API issues. */
export function eventIdPosition(id: string): string | undefined {
  return EVENT_ID.exec(id)?.[1];
}

export const TenantEventSchema = z
  .object({
    id: z.string().regex(EVENT_ID).describe('unique, never reused; orders the events of the tenant'),
    type: z.enum(TENANT_EVENT_TYPES),
    timestamp: z.iso.datetime().describe('when the change happened'),
    data: z
      .record(z.string(), z.unknown())
      .describe(
        'by type: mission.awaiting_approval {missionId, hitId, stepIndex}; mission.completed {missionId, status}; hit.created {hitId, missionId, expiresAt?, assignees?}; hit.decided {hitId, missionId, decision, decidedBy}; hit.expired {hitId, missionId}',
      ),
  })
  .describe('A state change of one of the tenant’s missions or approval items: ids and outcomes (and an item’s deadline and assignees), never content');
export type TenantEvent = z.output<typeof TenantEventSchema>;

/** A page of the log: events after a position, oldest first, and the id of the last one of the log. */
export const TenantEventPageSchema = z.object({
  items: z.array(TenantEventSchema),
  /** The newest event of the tenant's log at the time of reading (null: none yet): a reader is up to date when it has seen it. */
  latest: z.string().nullable(),
});
export type TenantEventPage = z.output<typeof TenantEventPageSchema>;

/**
 * `notify.events.list`: the events after `after` (an event id; from the start of what the log
 * keeps when absent) of `types`, of one mission when `missionId` is given.
 */
export const ListTenantEventsSchema = z.strictObject({
  after: z.string().max(64).optional(),
  types: z.array(z.enum(TENANT_EVENT_TYPES)).min(1).max(TENANT_EVENT_TYPES.length),
  missionId: z.uuid().optional(),
  /** 0: no events, only `latest` (where a reader that wants only what comes next starts). */
  limit: z.int().min(0).max(1_000).default(100),
});
export type ListTenantEvents = z.output<typeof ListTenantEventsSchema>;

/** `GET /api/events?types=&missionId=`: which events a stream sends (every type the token may read when `types` is absent). */
export const EventStreamQuerySchema = z.strictObject({
  types: z
    .string()
    .max(200)
    .transform((value, context) => {
      const types = [...new Set(value.split(',').map((type) => type.trim()))];
      const unknown = types.filter((type) => !(TENANT_EVENT_TYPES as readonly string[]).includes(type));
      if (unknown.length > 0 || types.length === 0) {
        context.addIssue({ code: 'custom', message: `must be event types separated by commas (${TENANT_EVENT_TYPES.join(', ')})` });
        return z.NEVER;
      }
      return types as TenantEventType[];
    })
    .optional(),
  missionId: z.uuid().optional(),
});
export type EventStreamQuery = z.output<typeof EventStreamQuerySchema>;

/** An `after` that no event of the log ever had, or one older than the log keeps. */
export function cursorExpired(id: string): DomainError {
  return new DomainError(ErrorCode.CursorExpired, `The event ${id.slice(0, 64)} is unknown or older than the events kept (7 days at least)`, [
    { field: 'Last-Event-ID', message: 'unknown or expired' },
  ]);
}
