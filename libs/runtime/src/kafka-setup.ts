import type * as tls from 'node:tls';
import { AclEntry, AclOperationTypes, AclPermissionTypes, AclResourceTypes, Admin, ResourcePatternTypes, SASLOptions } from 'kafkajs';
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

/** How long the setup waits for the broker it asked to enforce the ACLs it created or deleted. */
const ACLS_IN_FORCE_TIMEOUT_MS = 30_000;
const ACLS_POLL_MS = 100;

/** The part of kafkajs's Admin the ACL convergence uses. */
export type AclAdmin = Pick<Admin, 'describeAcls' | 'createAcls' | 'deleteAcls'>;

/** The ACLs `principal` holds, as the broker describes them. */
async function heldAcls(admin: AclAdmin, principal: string): Promise<AclEntry[]> {
  const described = await admin.describeAcls({
    resourceType: AclResourceTypes.ANY,
    resourcePatternType: ResourcePatternTypes.ANY,
    principal: `User:${principal}`,
    operation: AclOperationTypes.ANY,
    permissionType: AclPermissionTypes.ANY,
  });
  return described.resources.flatMap((resource) =>
    resource.acls.map((acl) => ({ resourceType: resource.resourceType, resourceName: resource.resourceName, resourcePatternType: resource.resourcePatternType, ...acl })),
  );
}

/**
 * Makes each principal's ACLs exactly `wanted(principal)`, then waits until the broker describes
 * them so: under KRaft a CreateAcls or DeleteAcls is answered once the controller has committed
 * it, and a broker enforces it only after it has replayed the record, so a service started right
 * after the setup could be refused (seen as every topic "missing and this client may not create
 * them" on a fresh broker). The broker asked is the one kafkajs sends DescribeAcls to: with
 * several brokers, each replays on its own, and this proves it for that one.
 */
export async function convergeAcls(
  admin: AclAdmin,
  principals: ReadonlyArray<string>,
  wanted: (principal: string) => AclEntry[],
  options: { readonly timeoutMs?: number; readonly pollMs?: number } = {},
): Promise<{ aclsCreated: number; aclsDeleted: number }> {
  let aclsCreated = 0;
  let aclsDeleted = 0;
  const changed: string[] = [];
  for (const principal of principals) {
    const wantedKeys = new Map(wanted(principal).map((acl) => [aclKey(acl), acl]));
    const held = await heldAcls(admin, principal);
    const stale = held.filter((acl) => !wantedKeys.has(aclKey(acl)));
    const heldKeys = new Set(held.map(aclKey));
    const missing = [...wantedKeys.values()].filter((acl) => !heldKeys.has(aclKey(acl)));
    if (stale.length > 0) {
      await admin.deleteAcls({ filters: stale });
      aclsDeleted += stale.length;
    }
    if (missing.length > 0) {
      await admin.createAcls({ acl: missing });
      aclsCreated += missing.length;
    }
    if (stale.length + missing.length > 0) changed.push(principal);
  }
  const timeoutMs = options.timeoutMs ?? ACLS_IN_FORCE_TIMEOUT_MS;
  const deadline = Date.now() + timeoutMs;
  for (const principal of changed) {
    const notInForce = () => new Error(`The broker does not show ${principal}'s ACLs as set ${timeoutMs} ms after they were written; run the setup again`);
    const wantedKeys = new Set(wanted(principal).map(aclKey));
    for (;;) {
      // Each poll is bounded by what is left of the wait, not only by kafkajs's own retries.
      let timer: NodeJS.Timeout | undefined;
      const outOfTime = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(notInForce()), Math.max(0, deadline - Date.now()));
      });
      const held = await Promise.race([heldAcls(admin, principal), outOfTime]).finally(() => clearTimeout(timer));
      const heldKeys = new Set(held.map(aclKey));
      const differs = heldKeys.size !== wantedKeys.size || [...wantedKeys].some((key) => !heldKeys.has(key));
      if (!differs) break;
      if (Date.now() >= deadline) throw notInForce();
      await new Promise((resolve) => setTimeout(resolve, options.pollMs ?? ACLS_POLL_MS));
    }
  }
  return { aclsCreated, aclsDeleted };
}

/**
 * What a deployment runs once before the services, as a Kafka administrator: creates the
 * platform's topics (existing ones are left as they are) and makes each principal's ACLs exactly
 * what `busAcls` says, removing any other ACL of those principals, and returns once the broker
 * enforces them. Safe to run again.
 */
export async function setUpKafka(options: KafkaSetupOptions): Promise<KafkaSetupResult> {
  const topics = setupTopics();
  await ensureTopics(options.brokers, topics, options.ssl, options.logger, options.sasl);
  const admin = kafkaClient(options.brokers, 'kafka-setup', options.ssl, options.logger, options.sasl).admin();
  await admin.connect();
  try {
    const { aclsCreated, aclsDeleted } = await convergeAcls(admin, options.principals ?? BUS_PRINCIPALS, busAcls);
    return { topics: topics.length, aclsCreated, aclsDeleted };
  } finally {
    await admin.disconnect();
  }
}
