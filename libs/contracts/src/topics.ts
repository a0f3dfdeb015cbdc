/**
 * Kafka topics, versioned: a breaking change to a topic's messages gets a new topic name.
 * Requests go to the owning service's request topic and carry a message type; events are
 * published by the service that owns the aggregate.
 */
export const Topics = {
  identityRequests: 'identity.requests.v1',
  missionRequests: 'mission.requests.v1',
  brainRequests: 'brain.requests.v1',
  hitRequests: 'hit.requests.v1',
  missionEvents: 'mission.events.v1',
  hitEvents: 'hit.events.v1',
  /**
   * Replies to the requests mission steps send (brain queries, approval items), keyed
   * `tenantId:missionId`: mission-service resumes a mission from them as events, so no handler
   * waits for another service.
   */
  missionStepResults: 'mission.step-results.v1',
  /** Requests to notification-service: pages of a tenant's event log. */
  notifyRequests: 'notify.requests.v1',
  /**
   * Each event recorded in a tenant's log, as clients see it (keyed by tenant, in the log's order):
   * every gateway replica reads all of them (a broadcast group of its own) for its open streams.
   */
  notifyEvents: 'notify.events.v1',
} as const;
export type Topic = (typeof Topics)[keyof typeof Topics];

/**
 * The consumer groups of the platform's services: one per (service, purpose). Kafka ACLs grant
 * each service its own groups only, so a group is named here once.
 */
export const ConsumerGroups = {
  idp: 'idp',
  missionService: 'mission-service',
  missionRunner: 'mission-runner',
  missionHitEvents: 'mission-hit-events',
  missionStepResults: 'mission-step-results',
  brainService: 'brain-service',
  hitService: 'hit-service',
  hitMissionEvents: 'hit-service-mission-events',
  notificationService: 'notification-service',
  notificationMissionEvents: 'notification-mission-events',
  notificationHitEvents: 'notification-hit-events',
  /** A broadcast group: each gateway instance reads as `gateway-events.<instance id>`. */
  gatewayEvents: 'gateway-events',
} as const;

/** Every topic the platform uses, with the partition count it is created with. */
export const TOPIC_PARTITIONS: Readonly<Record<Topic, number>> = {
  [Topics.identityRequests]: 3,
  [Topics.missionRequests]: 6,
  [Topics.brainRequests]: 6,
  [Topics.hitRequests]: 6,
  [Topics.missionEvents]: 6,
  [Topics.hitEvents]: 6,
  [Topics.missionStepResults]: 6,
  [Topics.notifyRequests]: 6,
  [Topics.notifyEvents]: 6,
};

/**
 * Topics whose messages may exceed Kafka's default limit of about 1 MiB, with the largest message
 * they accept (the topic's `max.message.bytes`): brain requests carry documents of up to 10 MiB.
 */
export const TOPIC_MAX_MESSAGE_BYTES: Readonly<Partial<Record<Topic, number>>> = {
  [Topics.brainRequests]: 16 * 1024 * 1024,
};

/** The types of the platform's events (their payloads: events.ts). Requests are named in messages.ts. */
export const EventTypes = {
  missionQueued: 'mission.queued',
  missionCancelled: 'mission.cancelled',
  missionCompleted: 'mission.completed',
  missionAwaitingApproval: 'mission.awaiting_approval',
  hitCreated: 'hit.created',
  hitDecided: 'hit.decided',
  hitExpired: 'hit.expired',
  /** An event recorded in a tenant's log (notify.events.v1). */
  tenantEventRecorded: 'notify.event.recorded',
} as const;
