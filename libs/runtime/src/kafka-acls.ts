import { AclEntry, AclOperationTypes, AclPermissionTypes, AclResourceTypes, ResourcePatternTypes } from 'kafkajs';
import { ConsumerGroups, Topic, Topics } from '@mission/contracts';
import { deadLetterTopic, REPLY_TOPIC_PREFIX } from '@mission/messaging';

/**
 * Who may do what on the bus. Each service signs in to Kafka as its own principal (its name,
 * `User:<name>`), and the broker's authorizer allows it only what its role below lists; anything
 * else is denied. So a foothold in one pod cannot speak for another: only the gateway writes
 * operator requests (`identity.requests.v1`), only mission-service publishes mission events, and
 * nobody but a requester reads its replies.
 */
export interface BusRole {
  /**
   * Topics it reads, each with the consumer group it reads them in; a broadcast group is each
   * instance's own (`<group>.<instance id>`), granted by prefix.
   */
  readonly consumes: ReadonlyArray<{ readonly topic: Topic; readonly group: string; readonly broadcast?: boolean }>;
  /** Topics it writes to: requests it sends, events it publishes, durable reply topics. */
  readonly produces: ReadonlyArray<Topic>;
}

const REQUEST_TOPICS: ReadonlySet<string> = new Set<Topic>([Topics.identityRequests, Topics.missionRequests, Topics.brainRequests, Topics.hitRequests, Topics.notifyRequests]);

/** The platform's principals and their roles: keep in step with what each service serves and sends. */
export const BUS_ROLES = {
  gateway: {
    // Every replica reads every recorded event, for the event streams it holds open.
    consumes: [{ topic: Topics.notifyEvents, group: ConsumerGroups.gatewayEvents, broadcast: true }],
    produces: [Topics.identityRequests, Topics.missionRequests, Topics.brainRequests, Topics.hitRequests, Topics.notifyRequests],
  },
  idp: {
    consumes: [{ topic: Topics.identityRequests, group: ConsumerGroups.idp }],
    produces: [],
  },
  'mission-service': {
    consumes: [
      { topic: Topics.missionRequests, group: ConsumerGroups.missionService },
      { topic: Topics.missionEvents, group: ConsumerGroups.missionRunner },
      { topic: Topics.hitEvents, group: ConsumerGroups.missionHitEvents },
      { topic: Topics.missionStepResults, group: ConsumerGroups.missionStepResults },
    ],
    // Its outbox publishes mission events and the requests of mission steps (answered on step results).
    produces: [Topics.missionEvents, Topics.brainRequests, Topics.hitRequests],
  },
  'brain-service': {
    consumes: [{ topic: Topics.brainRequests, group: ConsumerGroups.brainService }],
    produces: [Topics.missionStepResults],
  },
  'hit-service': {
    consumes: [
      { topic: Topics.hitRequests, group: ConsumerGroups.hitService },
      { topic: Topics.missionEvents, group: ConsumerGroups.hitMissionEvents },
    ],
    produces: [Topics.hitEvents, Topics.missionStepResults],
  },
  'notification-service': {
    consumes: [
      { topic: Topics.notifyRequests, group: ConsumerGroups.notificationService },
      { topic: Topics.missionEvents, group: ConsumerGroups.notificationMissionEvents },
      { topic: Topics.hitEvents, group: ConsumerGroups.notificationHitEvents },
    ],
    produces: [Topics.notifyEvents],
  },
} as const satisfies Record<string, BusRole>;

export type BusPrincipal = keyof typeof BUS_ROLES;
export const BUS_PRINCIPALS = Object.keys(BUS_ROLES) as BusPrincipal[];

/** The all-in-one process on Kafka (`npm start` with KAFKA_BROKERS) plays every role. */
export const STANDALONE_PRINCIPAL = 'standalone';

export function busRole(principal: string): BusRole {
  if (principal === STANDALONE_PRINCIPAL) {
    const roles: BusRole[] = Object.values(BUS_ROLES);
    return { consumes: roles.flatMap((role) => role.consumes), produces: [...new Set(roles.flatMap((role) => role.produces))] };
  }
  const role = (BUS_ROLES as Record<string, BusRole>)[principal];
  if (!role) throw new Error(`No bus role for principal "${principal}" (known: ${[...BUS_PRINCIPALS, STANDALONE_PRINCIPAL].join(', ')})`);
  return role;
}

/** The topics some service consumes: each has a dead-letter topic. */
export function consumedTopics(): Topic[] {
  return [...new Set(BUS_PRINCIPALS.flatMap((principal) => busRole(principal).consumes.map(({ topic }) => topic)))].sort();
}

/** The dead-letter topic of every consumed one. */
export function deadLetterTopics(): string[] {
  return consumedTopics().map(deadLetterTopic);
}

type Grant = readonly [AclResourceTypes, string, ResourcePatternTypes, AclOperationTypes];

/**
 * The ACLs of one principal (the client id its bus runs under is its name):
 * - DESCRIBE on every platform topic and dead-letter topic, which a bus checks at start;
 * - READ on what it consumes and in its groups, WRITE to the dead-letter topics of those;
 * - WRITE to what it produces, and to requesters' reply topics (`replies.`) if it serves requests;
 * - its own reply topics and groups (`replies.<name>.`): create, read, delete.
 * No principal may create or alter platform topics, or touch another's groups or replies.
 */
export function busAcls(principal: string): AclEntry[] {
  const role = busRole(principal);
  const { TOPIC, GROUP } = AclResourceTypes;
  const { LITERAL, PREFIXED } = ResourcePatternTypes;
  const { READ, WRITE, CREATE, DELETE, DESCRIBE } = AclOperationTypes;
  const ownReplies = `${REPLY_TOPIC_PREFIX}${principal}.`;
  const grants: Grant[] = [
    ...[...Object.values(Topics), ...deadLetterTopics()].map((topic): Grant => [TOPIC, topic, LITERAL, DESCRIBE]),
    ...role.consumes.flatMap(({ topic, group, broadcast }): Grant[] => [
      [TOPIC, topic, LITERAL, READ],
      // An instance's own broadcast group: read, and removed by the instance when it stops.
      ...(broadcast ? [READ, DELETE, DESCRIBE].map((operation): Grant => [GROUP, `${group}.`, PREFIXED, operation]) : [[GROUP, group, LITERAL, READ] as Grant]),
      [TOPIC, deadLetterTopic(topic), LITERAL, WRITE],
    ]),
    ...role.produces.map((topic): Grant => [TOPIC, topic, LITERAL, WRITE]),
    ...(role.consumes.some(({ topic }) => REQUEST_TOPICS.has(topic)) ? [[TOPIC, REPLY_TOPIC_PREFIX, PREFIXED, WRITE] as Grant] : []),
    ...[CREATE, READ, DELETE, DESCRIBE].map((operation): Grant => [TOPIC, ownReplies, PREFIXED, operation]),
    ...[READ, DELETE, DESCRIBE].map((operation): Grant => [GROUP, ownReplies, PREFIXED, operation]),
  ];
  const unique = new Map(grants.map((grant) => [grant.join('|'), grant]));
  return [...unique.values()].map(([resourceType, resourceName, resourcePatternType, operation]) => ({
    resourceType,
    resourceName,
    resourcePatternType,
    principal: `User:${principal}`,
    host: '*',
    operation,
    permissionType: AclPermissionTypes.ALLOW,
  }));
}

/** A stable text form of an ACL, to compare what the broker holds with what it should. */
export function aclKey(acl: Pick<AclEntry, 'resourceType' | 'resourceName' | 'resourcePatternType' | 'principal' | 'host' | 'operation' | 'permissionType'>): string {
  return [acl.principal, acl.host, acl.resourceType, acl.resourcePatternType, acl.resourceName, acl.operation, acl.permissionType].join('|');
}
