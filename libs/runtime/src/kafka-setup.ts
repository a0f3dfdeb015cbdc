import type * as tls from 'node:tls';
import { AclEntry, AclOperationTypes, AclPermissionTypes, AclResourceTypes, ResourcePatternTypes, SASLOptions } from 'kafkajs';
import { TOPIC_PARTITIONS } from '@mission/contracts';
import { BusLogger, deadLetterTopic, ensureTopics, kafkaClient } from '@mission/messaging';
import { aclKey, busAcls, BUS_PRINCIPALS, consumedTopics } from './kafka-acls';
import { platformTopics } from './platform-bus';

export interface KafkaSetupOptions {
  readonly brokers: string[];
  readonly ssl?: tls.ConnectionOptions | boolean;
  /** An administrator's sign-in: creating topics and ACLs needs more than any service may do. */
  readonly sasl?: SASLOptions;
  readonly logger: BusLogger;
  /** Whose ACLs to converge (default: every service; add STANDALONE_PRINCIPAL for `npm start` on Kafka). */
  readonly principals?: ReadonlyArray<string>;
}

export interface KafkaSetupResult {
  readonly topics: number;
  readonly aclsCreated: number;
  readonly aclsDeleted: number;
}

/** The platform's topics and the dead-letter topic of every consumed one (partitions as their source). */
export function setupTopics(): Array<{ name: string; partitions: number; maxMessageBytes?: number }> {
  return [...platformTopics(), ...consumedTopics().map((topic) => ({ name: deadLetterTopic(topic), partitions: TOPIC_PARTITIONS[topic] }))];
}

/**
 * What a deployment runs once before the services, as a Kafka administrator: creates the
 * platform's topics (existing ones are left as they are) and makes each principal's ACLs exactly
 * what `busAcls` says, removing any other ACL of those principals. Safe to run again.
 */
export async function setUpKafka(options: KafkaSetupOptions): Promise<KafkaSetupResult> {
  const topics = setupTopics();
  await ensureTopics(options.brokers, topics, options.ssl, options.logger, options.sasl);
  const admin = kafkaClient(options.brokers, 'kafka-setup', options.ssl, options.logger, options.sasl).admin();
  await admin.connect();
  try {
    let aclsCreated = 0;
    let aclsDeleted = 0;
    for (const principal of options.principals ?? BUS_PRINCIPALS) {
      const wanted = new Map(busAcls(principal).map((acl) => [aclKey(acl), acl]));
      const described = await admin.describeAcls({
        resourceType: AclResourceTypes.ANY,
        resourcePatternType: ResourcePatternTypes.ANY,
        principal: `User:${principal}`,
        operation: AclOperationTypes.ANY,
        permissionType: AclPermissionTypes.ANY,
      });
      const held: AclEntry[] = described.resources.flatMap((resource) =>
        resource.acls.map((acl) => ({ resourceType: resource.resourceType, resourceName: resource.resourceName, resourcePatternType: resource.resourcePatternType, ...acl })),
      );
      const stale = held.filter((acl) => !wanted.has(aclKey(acl)));
      const heldKeys = new Set(held.map(aclKey));
      const missing = [...wanted.values()].filter((acl) => !heldKeys.has(aclKey(acl)));
      if (stale.length > 0) {
        await admin.deleteAcls({ filters: stale });
        aclsDeleted += stale.length;
      }
      if (missing.length > 0) {
        await admin.createAcls({ acl: missing });
        aclsCreated += missing.length;
      }
    }
    return { topics: topics.length, aclsCreated, aclsDeleted };
  } finally {
    await admin.disconnect();
  }
}
