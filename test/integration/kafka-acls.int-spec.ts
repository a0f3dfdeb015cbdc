import { randomUUID } from 'node:crypto';
import { AclOperationTypes, AclPermissionTypes, AclResourceTypes, Kafka, LogEntry, logLevel, ResourcePatternTypes } from 'kafkajs';
import { ConsumerGroups, Topics } from '@mission/contracts';
import { KafkaBus } from '@mission/messaging';
import { busAcls, platformTopics } from '@mission/runtime';
import { kafkaAccessFromEnv, kafkaClientOptions, setUpKafkaAsAdmin } from '../support/kafka-access';

const access = kafkaAccessFromEnv();
/** Only against a broker that authenticates and authorizes (the one the global setup starts). */
const describeWithAuthorizer = access.mechanism ? describe : describe.skip;

/**
 * A kafkajs client signed in as `principal` (a wrong password when `password` is given). kafkajs
 * reports some refusals only in its debug log (a group it may not join is "no coordinator"):
 * `brokerErrors` collects the errors the broker answered with.
 */
function clientAs(principal: string, password?: string, brokerErrors?: string[]): Kafka {
  const options = kafkaClientOptions(access, principal);
  return new Kafka({
    ...options,
    ...(password ? { sasl: { mechanism: 'scram-sha-512' as const, username: principal, password } } : {}),
    clientId: `acl-test-${principal}`,
    logLevel: brokerErrors ? logLevel.DEBUG : logLevel.NOTHING,
    ...(brokerErrors
      ? {
          logCreator: () => (entry: LogEntry) => {
            const error = (entry.log as { error?: unknown }).error;
            if (error !== undefined) brokerErrors.push(reasons(error) || String(error));
          },
        }
      : {}),
    retry: { retries: 0 },
    connectionTimeout: 3_000,
  });
}

/** What a refusal says, including the errors kafkajs gathers per topic. */
function reasons(error: unknown, depth = 0): string {
  if (!error || depth > 4) return '';
  const { message, type, errors, originalError, cause } = error as { message?: string; type?: string; errors?: unknown[]; originalError?: unknown; cause?: unknown };
  return [type, message, ...(errors ?? []).map((inner) => reasons(inner, depth + 1)), reasons(originalError, depth + 1), reasons(cause, depth + 1)].filter(Boolean).join('; ');
}

/** Rejects unless the broker refused `action` for want of authorization. */
async function refused(action: Promise<unknown>): Promise<void> {
  const outcome = await action.then(
    () => 'it was allowed',
    (error: unknown) => reasons(error),
  );
  expect(outcome).toMatch(/authoriz/i);
}

/** ACL changes reach the broker's authorizer through its metadata log: a moment after they are made. */
async function eventually(check: () => Promise<void>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await check();
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
}

async function send(principal: string, topic: string): Promise<void> {
  const producer = clientAs(principal).producer({ allowAutoTopicCreation: false, retry: { retries: 0 } });
  await producer.connect();
  try {
    await producer.send({ topic, acks: -1, messages: [{ key: 'acl-test', value: 'not a platform message' }] });
  } finally {
    await producer.disconnect();
  }
}

/** Resolves with the first message `principal` reads from `topic` in `group`, or rejects with why it may not. */
async function readOne(principal: string, topic: string, group: string, brokerErrors?: string[]): Promise<string> {
  const consumer = clientAs(principal, undefined, brokerErrors).consumer({ groupId: group, retry: { retries: 0 } });
  await consumer.connect();
  try {
    await consumer.subscribe({ topics: [topic], fromBeginning: true });
    let timer: NodeJS.Timeout | undefined;
    return await new Promise<string>((resolve, reject) => {
      consumer.on(consumer.events.CRASH, ({ payload }) => reject(payload.error));
      consumer
        .run({
          eachMessage: async ({ message }) => resolve(message.value?.toString('utf8') ?? ''),
        })
        .catch(reject);
      timer = setTimeout(() => reject(new Error(`nothing read from ${topic} within 20 s`)), 20_000);
    }).finally(() => clearTimeout(timer));
  } finally {
    await consumer.disconnect();
  }
}

describeWithAuthorizer('Kafka principals and ACLs', () => {
  /** A reply topic of a gateway instance, made by the gateway itself as its bus does at start. */
  const replies = `replies.gateway.acl-test-${randomUUID().slice(0, 8)}`;
  let gatewayAdmin: ReturnType<Kafka['admin']>;

  beforeAll(async () => {
    gatewayAdmin = clientAs('gateway').admin();
    await gatewayAdmin.connect();
    await gatewayAdmin.createTopics({ topics: [{ topic: replies, numPartitions: 1 }], waitForLeaders: true });
  });

  afterAll(async () => {
    await gatewayAdmin.deleteTopics({ topics: [replies] }).catch(() => undefined);
    await gatewayAdmin.disconnect();
  });

  it('refuses a client without the right password', async () => {
    const admin = clientAs('brain-service', 'not-the-password').admin();
    await expect(admin.connect()).rejects.toThrow(/SASL|authenticat/i);
    await admin.disconnect().catch(() => undefined);
  });

  it('lets no service speak for another: operator requests come only from the gateway, events only from their owner', async () => {
    // A foothold in brain-service cannot forge identity.client.create or rotate signing keys…
    await refused(send('brain-service', Topics.identityRequests));
    // …nor publish another service's events or requests.
    await refused(send('brain-service', Topics.missionEvents));
    await refused(send('hit-service', Topics.identityRequests));
    await refused(send('idp', Topics.missionRequests));
    await refused(send('gateway', Topics.hitEvents));
    // The same principals may write what their roles say (positive controls for the refusals above;
    // into a reply topic, so that no service of a later suite reads a stray message).
    await expect(send('brain-service', replies)).resolves.toBeUndefined();
    await expect(send('idp', replies)).resolves.toBeUndefined();
  });

  it("keeps a requester's replies to itself, and groups to their service", async () => {
    // A requester creates its own reply topics (beforeAll), and no other's.
    await refused(gatewayAdmin.createTopics({ topics: [{ topic: `replies.idp.acl-test-${randomUUID().slice(0, 8)}`, numPartitions: 1 }] }));
    // A server answers into it; the requester reads the answer; another service cannot.
    await send('brain-service', replies);
    await expect(readOne('gateway', replies, `${replies}.reader`)).resolves.toBe('not a platform message');
    await refused(readOne('brain-service', replies, `replies.brain-service.acl-test-${randomUUID().slice(0, 8)}`));
    // Nor may a service read in another service's group (and so take its messages).
    const brokerErrors: string[] = [];
    await expect(readOne('brain-service', Topics.missionRequests, ConsumerGroups.missionService, brokerErrors)).rejects.toThrow();
    expect(brokerErrors.join('\n')).toMatch(/GROUP_AUTHORIZATION_FAILED|not authorized to access group/i);
  }, 60_000);

  it('lets no service create, delete or reconfigure platform topics', async () => {
    const admin = clientAs('mission-service').admin();
    await admin.connect();
    try {
      await refused(admin.createTopics({ topics: [{ topic: `acl-test-${randomUUID().slice(0, 8)}`, numPartitions: 1 }] }));
      await refused(admin.deleteTopics({ topics: [Topics.missionEvents], timeout: 3_000 }));
    } finally {
      await admin.disconnect();
    }
  });

  it('stops a service that finds a topic missing with the reason, and starts it once the setup made them', async () => {
    const silent = { info: () => undefined, warn: () => undefined, error: () => undefined };
    const missing = `acl-test-missing-${randomUUID().slice(0, 8)}`;
    const early = new KafkaBus({ ...kafkaClientOptions(access, 'brain-service'), clientId: 'brain-service', topics: [{ name: missing, partitions: 1 }], logger: silent });
    // Only the topic it may not create is named (its own reply topic went in the same request).
    await expect(early.start()).rejects.toThrow(`Topics ${missing} are missing and this client may not create them: run the platform's Kafka setup`);
    await early.close().catch(() => undefined);
    // With the platform's topics (made by the setup) it starts: its own reply topic is the one it creates.
    const bus = new KafkaBus({ ...kafkaClientOptions(access, 'brain-service'), clientId: 'brain-service', topics: platformTopics(), logger: silent });
    await expect(bus.start()).resolves.toBeUndefined();
    expect(bus.replyTopic).toMatch(/^replies\.brain-service\./);
    await bus.close();
  });

  it('the setup makes ACLs exactly what the platform declares: a stray grant is removed, a missing one restored', async () => {
    const scratch = `acl-test-${randomUUID().slice(0, 8)}`;
    const stray = {
      resourceType: AclResourceTypes.TOPIC,
      resourceName: 'acl-test-',
      resourcePatternType: ResourcePatternTypes.PREFIXED,
      principal: 'User:brain-service',
      host: '*',
      operation: AclOperationTypes.CREATE,
      permissionType: AclPermissionTypes.ALLOW,
    };
    const create = async (topic: string): Promise<void> => {
      const asBrain = clientAs('brain-service').admin();
      await asBrain.connect();
      try {
        await asBrain.createTopics({ topics: [{ topic, numPartitions: 1 }] });
      } finally {
        await asBrain.disconnect();
      }
    };
    const owed = busAcls('brain-service').find((acl) => acl.resourceType === AclResourceTypes.GROUP && acl.resourceName === ConsumerGroups.brainService);
    if (!owed) throw new Error('brain-service has no ACL for its group');
    const admin = clientAs('admin').admin();
    await admin.connect();
    try {
      await admin.createAcls({ acl: [stray] });
      await admin.deleteAcls({ filters: [owed] });
      await eventually(() => create(`${scratch}-a`));

      const output = await setUpKafkaAsAdmin(access);
      expect(output).toMatch(/"aclsCreated":1,"aclsDeleted":1/);

      await eventually(() => refused(create(`${scratch}-b`)));
      const held = await admin.describeAcls({ ...owed, operation: AclOperationTypes.ANY, permissionType: AclPermissionTypes.ANY, host: undefined });
      expect(held.resources.flatMap((resource) => resource.acls.map((acl) => acl.operation))).toContain(AclOperationTypes.READ);
    } finally {
      // Whatever happened above, later suites find brain-service's ACLs as the platform declares them.
      await admin.deleteAcls({ filters: [stray] }).catch(() => undefined);
      await admin.createAcls({ acl: [owed] }).catch(() => undefined);
      await admin.deleteTopics({ topics: [`${scratch}-a`, `${scratch}-b`] }).catch(() => undefined);
      await admin.disconnect();
    }
  }, 120_000);
});
