import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Kafka, logLevel, Partitioners, SASLOptions } from 'kafkajs';
import { BusHealth, deadLetterTopic, HandlerOptions, MessageBus, NO_BUS_METRICS, OutgoingMessage, RequestOptions } from '../bus';
import { BusLogger } from '../delivery';
import { runWithTenant } from '@mission/tenant-context';
import { describeBusContract } from '../testing';
import { ensureTopics, KafkaBus, kafkaLogCreator, TopicSpec } from './kafka-bus';
import { headersFromKafka, withTimeout } from './kafka-mapping';
import { KeyEncryptionKey, LocalKeyProvider, TransitCipher } from '@mission/crypto';
import { PAYLOAD_KEY_HEADER, PayloadCodec, sealedJsonCodec } from '../payload-codec';
import { eventHandlers } from '../event-handlers';
import { z } from 'zod';

const brokersVariable = process.env.KAFKA_BROKERS;
if (!brokersVariable) {
  throw new Error('KAFKA_BROKERS is not set: run with `npx jest -c jest.integration.config.js` (its global setup starts Kafka) or export it');
}
const brokers = brokersVariable.split(',').map((broker) => broker.trim());
/**
 * The suite's broker authorizes every client by ACLs: these tests make topics and groups of their
 * own, so they sign in as its administrator (a broker without SASL takes them as they are).
 */
const sasl: SASLOptions | undefined =
  process.env.KAFKA_SASL_MECHANISM && process.env.KAFKA_CREDENTIALS_DIR
    ? {
        mechanism: process.env.KAFKA_SASL_MECHANISM as 'scram-sha-512',
        username: 'admin',
        password: readFileSync(path.join(process.env.KAFKA_CREDENTIALS_DIR, 'admin.password'), 'utf8').trim(),
      }
    : undefined;

/** Tenant handlers (the default) refuse messages without a tenant: the tests below send as this one. */
const TENANT = randomUUID();
const CONTRACT_KEK = KeyEncryptionKey.generate();
const asTenant = <T>(fn: () => Promise<T>): Promise<T> => runWithTenant({ tenantId: TENANT }, fn);

/** Polls `probe` until it holds, or fails naming `what`. */
async function until(probe: () => boolean, what: string, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Kafka and adapter warnings are kept and printed only when KAFKA_BUS_LOG=1. */
const logger: BusLogger =
  process.env.KAFKA_BUS_LOG === '1'
    ? { warn: (msg, ctx) => console.warn(msg, ctx), error: (msg, ctx) => console.error(msg, ctx) }
    : { warn: () => undefined, error: () => undefined };

/**
 * The contract names its groups ("contract-server", …); Kafka keeps groups across runs, and a
 * member left behind by a killed run stalls the next join for a session timeout. So every group
 * this run uses gets the run's suffix.
 */
class PerRunGroups implements MessageBus {
  constructor(
    private readonly bus: MessageBus,
    private readonly suffix: string,
    private readonly used: Set<string>,
  ) {}
  serve(topic: string, group: string, handlers: Parameters<MessageBus['serve']>[2], options?: HandlerOptions): void {
    this.bus.serve(topic, this.group(group), handlers, options);
  }
  subscribe(topic: string, group: string, handler: Parameters<MessageBus['subscribe']>[2], options?: HandlerOptions): void {
    this.bus.subscribe(topic, this.group(group), handler, options);
  }
  private group(name: string): string {
    const group = `${name}.${this.suffix}`;
    this.used.add(group);
    return group;
  }
  start(): Promise<void> {
    return this.bus.start();
  }
  request<R>(topic: string, type: string, payload: unknown, options?: RequestOptions): Promise<R> {
    return this.bus.request<R>(topic, type, payload, options);
  }
  publish(topic: string, message: OutgoingMessage): Promise<void> {
    return this.bus.publish(topic, message);
  }
  publishAll(items: Parameters<MessageBus['publishAll']>[0]): Promise<void> {
    return this.bus.publishAll(items);
  }
  close(): Promise<void> {
    return this.bus.close();
  }
  health(): BusHealth {
    return this.bus.health();
  }
}

describeBusContract('kafka', async () => {
  const run = randomUUID().slice(0, 8);
  const topics = { requests: `contract.requests.${run}`, operatorRequests: `contract.operator.${run}`, events: `contract.events.${run}`, unserved: `contract.unserved.${run}` };
  const specs: TopicSpec[] = [
    { name: topics.requests, partitions: 3 },
    { name: topics.operatorRequests, partitions: 1 },
    { name: topics.events, partitions: 3 },
    { name: topics.unserved, partitions: 1 },
  ];
  const retry = { attempts: 3, initialBackoffMs: 10, maxBackoffMs: 20 };
  await ensureTopics(brokers, specs, undefined, logger, sasl);

  const kafka = new Kafka({ brokers, sasl, clientId: `contract-reader-${run}`, logLevel: logLevel.WARN, logCreator: kafkaLogCreator(logger) });
  const admin = kafka.admin();
  await admin.connect();
  const groups = new Set<string>();

  /** Reads `<topic>.dlq` from the beginning up to its current end with a throwaway consumer. */
  const deadLetters = async (topic: string): Promise<Array<{ type: string; headers: Record<string, string> }>> => {
    const dlq = deadLetterTopic(topic);
    const ends = new Map((await admin.fetchTopicOffsets(dlq)).filter((p) => BigInt(p.high) > BigInt(p.low)).map((p) => [p.partition, BigInt(p.high)]));
    if (ends.size === 0) return [];
    const groupId = `dlq-reader.${run}.${randomUUID().slice(0, 8)}`;
    groups.add(groupId);
    const consumer = kafka.consumer({ groupId, maxWaitTimeInMs: 100 });
    const found: Array<{ type: string; headers: Record<string, string> }> = [];
    try {
      await consumer.connect();
      await consumer.subscribe({ topics: [dlq], fromBeginning: true });
      await withTimeout(
        new Promise<void>((resolve) => {
          void consumer.run({
            autoCommit: false,
            eachMessage: async ({ partition, message }) => {
              const headers = headersFromKafka(message.headers);
              found.push({ type: headers['message-type'] ?? '', headers });
              const end = ends.get(partition);
              if (end !== undefined && BigInt(message.offset) + 1n >= end) ends.delete(partition);
              if (ends.size === 0) resolve();
            },
          });
        }),
        10_000,
        () => new Error(`Timed out reading ${dlq}`),
      );
    } finally {
      await consumer.disconnect();
    }
    return found;
  };

  return {
    topics,
    retry,
    // As deployed: every payload sealed under its tenant's data key.
    createBus: (metrics) =>
      new PerRunGroups(
        new KafkaBus({
          brokers,
          sasl,
          clientId: `contract-${run}`,
          topics: specs,
          retry,
          logger,
          codec: sealedJsonCodec(new TransitCipher(new LocalKeyProvider(CONTRACT_KEK))),
          ...(metrics ? { metrics } : {}),
        }),
        run,
        groups,
      ),
    keysOnOnePartition: (topic, count) => {
      // The producer's own partitioner (murmur2 on the key, as the bus sends).
      const partitionOf = Partitioners.DefaultPartitioner();
      const partitions = specs.find((spec) => spec.name === topic)?.partitions ?? 1;
      const partitionMetadata = Array.from({ length: partitions }, (_, partitionId) => ({ partitionId, leader: 1, partitionErrorCode: 0, replicas: [1], isr: [1] }));
      const keys: string[] = [];
      for (let n = 0; keys.length < count; n++) {
        const key = `key-${n}-${run}`;
        if (partitionOf({ topic, partitionMetadata, message: { key, value: null } }) === 0) keys.push(key);
      }
      return keys;
    },
    deadLetters,
    teardown: async () => {
      try {
        await admin.deleteGroups([...groups]).catch(() => undefined);
        const existing = new Set(await admin.listTopics());
        const mine = [...specs.map((s) => s.name), ...[topics.events, topics.requests, topics.operatorRequests].map(deadLetterTopic)].filter((topic) => existing.has(topic));
        await admin.deleteTopics({ topics: mine, timeout: 5_000 }).catch(() => undefined);
      } finally {
        await admin.disconnect();
      }
    },
  };
});

/** What only Kafka can get wrong: commits, group membership, reply topics, records from other clients. */
describe('KafkaBus on a real broker', () => {
  const run = randomUUID().slice(0, 8);
  const created = new Set<string>();
  /** Every test reads its own topics: a group reading from the beginning never sees another test's records. */
  const topicsFor = (test: string) => {
    const topics = { requests: `kafka.${test}.requests.${run}`, events: `kafka.${test}.events.${run}` };
    const specs: TopicSpec[] = [
      { name: topics.requests, partitions: 3 },
      { name: topics.events, partitions: 3 },
    ];
    for (const name of [topics.requests, topics.events, deadLetterTopic(topics.events), deadLetterTopic(topics.requests)]) created.add(name);
    return { ...topics, specs };
  };
  const kafka = new Kafka({ brokers, sasl, clientId: `kafka-bus-it-${run}`, logLevel: logLevel.WARN, logCreator: kafkaLogCreator(logger) });
  const admin = kafka.admin();
  const raw = kafka.producer({ allowAutoTopicCreation: false });
  const buses: KafkaBus[] = [];
  const group = (name: string) => `${name}.${run}`;
  const newBus = (specs: TopicSpec[], options: Partial<ConstructorParameters<typeof KafkaBus>[0]> = {}): KafkaBus => {
    const bus = new KafkaBus({ brokers, sasl, clientId: `it-${run}`, topics: specs, logger, retry: { attempts: 3, initialBackoffMs: 10, maxBackoffMs: 20 }, ...options });
    buses.push(bus);
    return bus;
  };

  beforeAll(async () => {
    await admin.connect();
    await raw.connect();
  }, 60_000);

  afterAll(async () => {
    await Promise.allSettled(buses.map((bus) => bus.close()));
    await raw.disconnect();
    // Deleting a topic that does not exist fails only after the admin client's retries: list first.
    const existing = new Set(await admin.listTopics());
    await admin.deleteTopics({ topics: [...created].filter((topic) => existing.has(topic)), timeout: 5_000 }).catch(() => undefined);
    await admin.disconnect();
  }, 30_000);

  it('rejects requests still waiting when it closes, and removes its reply topic', async () => {
    const topics = topicsFor('close');
    const requester = newBus(topics.specs);
    await requester.start();
    expect(await admin.listTopics()).toContain(requester.replyTopic);
    const waiting = requester.request(topics.requests, 'nobody-serves-this', {}, { timeoutMs: 20_000 });
    const started = Date.now();
    await new Promise((resolve) => setTimeout(resolve, 100));
    await requester.close();
    await expect(waiting).rejects.toMatchObject({ code: 'dependency_unavailable' });
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(await admin.listTopics()).not.toContain(requester.replyTopic);
    expect(requester.health()).toEqual({ up: false, detail: 'kafka bus is stopped' });
  }, 30_000);

  it('keeps answering new requesters after earlier ones went away with their reply topics', async () => {
    const topics = topicsFor('requesters');
    const server = newBus(topics.specs);
    server.serve(topics.requests, group('requesters'), { echo: async (message) => message.payload });
    await server.start();
    for (let round = 0; round < 3; round++) {
      const requester = newBus(topics.specs);
      await requester.start();
      await expect(asTenant(() => requester.request(topics.requests, 'echo', { round }, { timeoutMs: 5_000 }))).resolves.toEqual({ round });
      await requester.close(); // deletes its reply topic, which the server's producer has written to
    }
  }, 60_000);

  it('replaces a consumer that kafkajs stopped for good, and serves again once it has rejoined', async () => {
    const topics = topicsFor('replace');
    const server = newBus(topics.specs);
    server.serve(topics.requests, group('replace'), { echo: async (message) => message.payload });
    await server.start();
    const requester = newBus(topics.specs);
    await requester.start();
    await expect(asTenant(() => requester.request(topics.requests, 'echo', { n: 1 }, { timeoutMs: 5_000 }))).resolves.toEqual({ n: 1 });

    // What the CRASH listener does when kafkajs reports a crash without restart (white box: such
    // crashes cannot be provoked from outside on demand).
    type Entry = { plan: { name: string }; consumer: { disconnect(): Promise<void> }; status: string };
    const fleet = (server as unknown as { fleet: { entries: Entry[]; replace(entry: Entry, failed: unknown): void } }).fleet;
    const serving = fleet.entries.find((entry) => entry.plan.name === `serve ${group('replace')}`);
    if (!serving) throw new Error('no serving consumer');
    const failed = serving.consumer;
    serving.status = 'crashed';
    fleet.replace(serving, failed);
    expect(server.health().up).toBe(false);

    await until(() => serving.consumer !== failed && server.health().up, 'the replacement consumer to join');
    await expect(asTenant(() => requester.request(topics.requests, 'echo', { n: 2 }, { timeoutMs: 10_000 }))).resolves.toEqual({ n: 2 });
    await server.close();
    expect(server.health()).toEqual({ up: false, detail: 'kafka bus is stopped' });
  }, 60_000);

  it('leaves an event interrupted by close uncommitted, for the next member of its group', async () => {
    const topics = topicsFor('handover');
    const seenByFirst: number[] = [];
    const first = newBus(topics.specs, { retry: { attempts: 3, initialBackoffMs: 1_500, maxBackoffMs: 1_500 } });
    first.subscribe(topics.events, group('handover'), async (message) => {
      seenByFirst.push(message.attempt);
      throw new Error('not now');
    });
    await first.start();
    const id = randomUUID();
    await asTenant(() => first.publish(topics.events, { id, type: 'handover', key: 'handover', payload: { n: 1 } }));
    await until(() => seenByFirst.length === 1, 'the first delivery');
    await first.close();
    expect(seenByFirst).toEqual([1]);

    const second = newBus(topics.specs);
    const seenBySecond: Array<{ id: string; attempt: number }> = [];
    second.subscribe(topics.events, group('handover'), async (message) => {
      seenBySecond.push({ id: message.id, attempt: message.attempt });
    });
    await second.start();
    await until(() => seenBySecond.some((m) => m.id === id), 'the redelivery to the next member');
    expect(seenBySecond.filter((m) => m.id === id)).toEqual([{ id, attempt: 1 }]);
  }, 60_000);

  it('shares a serving group between instances, each starting ready to serve', async () => {
    const topics = topicsFor('shared');
    const servers = ['one', 'two'].map((name) => {
      const server = newBus(topics.specs);
      server.serve(topics.requests, group('shared'), { whoami: async () => name });
      return server;
    });
    await servers[0].start();
    await servers[1].start(); // joining makes the first one rebalance; start waits for the new assignment
    const client = newBus(topics.specs);
    await client.start();
    const answers = await Promise.all(Array.from({ length: 30 }, (_, n) => asTenant(() => client.request<string>(topics.requests, 'whoami', {}, { key: `key-${n}` }))));
    expect(new Set(answers)).toEqual(new Set(['one', 'two']));
  }, 60_000);

  it('records how long after its send each request, reply and event reached its handler, and how long each send took', async () => {
    const topics = topicsFor('delivery');
    const seen: Array<{ topic: string; group: string; seconds: number }> = [];
    const sends: Array<{ bus: string; topic: string; seconds: number; ok: boolean }> = [];
    const metrics = { ...NO_BUS_METRICS, delivered: (topic: string, group: string, seconds: number) => void seen.push({ topic, group, seconds }) };
    const sendsOf = (bus: string) => ({ sent: (topic: string, seconds: number, ok: boolean) => void sends.push({ bus, topic, seconds, ok }) });
    const server = newBus(topics.specs, { metrics: { ...metrics, ...sendsOf('server') } });
    server.serve(topics.requests, group('delivery-serve'), { echo: async (message) => message.payload });
    server.subscribe(topics.events, group('delivery-events'), async () => undefined);
    await server.start();
    const client = newBus(topics.specs, { metrics: { ...metrics, ...sendsOf('client') } });
    await client.start();
    await expect(asTenant(() => client.request(topics.requests, 'echo', { n: 1 }, { timeoutMs: 10_000 }))).resolves.toEqual({ n: 1 });
    // The request's send by the requester, the reply's by the server: a reply to a requester's own topic under one label, whatever the topic.
    // (The reply can reach the requester before the broker's acknowledgement reaches the server, which then times it.)
    expect(sends.filter((entry) => entry.bus === 'client').map(({ topic, ok }) => ({ topic, ok }))).toEqual([{ topic: topics.requests, ok: true }]);
    await until(() => sends.some((entry) => entry.bus === 'server'), "the reply's send timed");
    expect(sends.filter((entry) => entry.bus === 'server').map(({ topic, ok }) => ({ topic, ok }))).toEqual([{ topic: 'replies', ok: true }]);
    await asTenant(() => client.publish(topics.events, { type: 'noted', key: `${TENANT}:a`, payload: {} }));
    await until(() => seen.some((entry) => entry.topic === topics.events), 'the event delivered');
    const of = (topic: string, groupName: string) => seen.filter((entry) => entry.topic === topic && entry.group === groupName);
    expect(of(topics.requests, group('delivery-serve'))).toHaveLength(1);
    expect(of('replies', 'replies')).toHaveLength(1);
    expect(of(topics.events, group('delivery-events'))).toHaveLength(1);
    // The producer's clock and this one are the same here: a delay, never negative, never absurd.
    for (const entry of [...seen, ...sends]) {
      expect(entry.seconds).toBeGreaterThanOrEqual(0);
      expect(entry.seconds).toBeLessThan(10);
    }
  }, 60_000);

  it('skips a request whose requester stopped waiting, and answers the next one', async () => {
    const topics = topicsFor('deadline');
    const handled: string[] = [];
    const server = newBus(topics.specs);
    server.serve(topics.requests, group('deadline'), {
      note: async (message) => {
        handled.push((message.payload as { which: string }).which);
        return 'noted';
      },
    });
    await server.start();
    await raw.send({
      topic: topics.requests,
      messages: [
        {
          key: 'same-key',
          value: JSON.stringify({ which: 'expired' }),
          headers: {
            'tenant-id': TENANT,
            'message-id': randomUUID(),
            'message-type': 'note',
            'correlation-id': randomUUID(),
            'reply-to': 'replies.gone',
            'request-deadline': String(Date.now() - 1_000),
          },
        },
      ],
    });
    const client = newBus(topics.specs);
    await client.start();
    await expect(asTenant(() => client.request(topics.requests, 'note', { which: 'current' }, { key: 'same-key' }))).resolves.toBe('noted');
    expect(handled).toEqual(['current']);
  }, 60_000);

  it('dead-letters a record it cannot read at once, keeping its bytes', async () => {
    const topics = topicsFor('garbage');
    const handled: string[] = [];
    const consumerBus = newBus(topics.specs);
    consumerBus.subscribe(topics.events, group('garbage'), async (message) => {
      handled.push(message.id);
    });
    await consumerBus.start();
    const id = randomUUID();
    await raw.send({ topic: topics.events, messages: [{ key: 'garbage', value: '{not json', headers: { 'tenant-id': TENANT, 'message-id': id, 'message-type': 'garbage' } }] });
    const after = randomUUID();
    await asTenant(() => consumerBus.publish(topics.events, { id: after, type: 'fine', key: 'garbage', payload: {} }));
    await until(() => handled.includes(after), 'the event behind the unreadable one');
    expect(handled).not.toContain(id);

    const reader = kafka.consumer({ groupId: group(`dlq-${randomUUID().slice(0, 8)}`), maxWaitTimeInMs: 100 });
    await reader.connect();
    await reader.subscribe({ topics: [deadLetterTopic(topics.events)], fromBeginning: true });
    const dead = await withTimeout(
      new Promise<{ value: string; headers: Record<string, string> }>((resolve) => {
        void reader.run({
          eachMessage: async ({ message }) => {
            const headers = headersFromKafka(message.headers);
            if (headers['message-id'] === id) resolve({ value: message.value?.toString('utf8') ?? '', headers });
          },
        });
      }),
      15_000,
      () => new Error('the unreadable record did not reach the dead-letter topic'),
    ).finally(() => reader.disconnect());
    expect(dead.value).toBe('{not json');
    expect(dead.headers).toMatchObject({ 'message-type': 'garbage', attempts: '1' });
    expect(dead.headers.error).toContain('SyntaxError');
  }, 60_000);
});

/** Payload encryption as the broker sees it: ciphertext only, and nothing it can be tricked into delivering. */
describe('KafkaBus with sealed payloads on a real broker', () => {
  const run = randomUUID().slice(0, 8);
  const topics = { events: `kafka.sealed.events.${run}`, requests: `kafka.sealed.requests.${run}` };
  const specs: TopicSpec[] = [
    { name: topics.events, partitions: 1 },
    { name: topics.requests, partitions: 1 },
  ];
  const kafka = new Kafka({ brokers, sasl, clientId: `sealed-it-${run}`, logLevel: logLevel.WARN, logCreator: kafkaLogCreator(logger) });
  const admin = kafka.admin();
  const raw = kafka.producer({ allowAutoTopicCreation: false });
  const kek = KeyEncryptionKey.generate();
  const sealed = () => sealedJsonCodec(new TransitCipher(new LocalKeyProvider(kek)));
  const buses: KafkaBus[] = [];
  const received: Array<{ id: string; payload: unknown }> = [];
  const CANARY = `canary-${randomUUID()}`;

  const newBus = (codec = sealed()): KafkaBus => {
    const bus = new KafkaBus({ brokers, sasl, clientId: `sealed-${run}`, topics: specs, logger, retry: { attempts: 1, initialBackoffMs: 10, maxBackoffMs: 10 }, codec });
    buses.push(bus);
    return bus;
  };

  /** The records of `topic` from the start, raw (what anyone reading the broker gets), until `enough` holds. */
  type RawRecord = { value: Buffer; headers: Record<string, string> };
  const records = async (topic: string, enough: number | ((found: RawRecord[]) => boolean)): Promise<RawRecord[]> => {
    const done = typeof enough === 'number' ? (found: RawRecord[]) => found.length >= enough : enough;
    const reader = kafka.consumer({ groupId: `sealed-reader-${randomUUID().slice(0, 8)}`, maxWaitTimeInMs: 100 });
    await reader.connect();
    await reader.subscribe({ topics: [topic], fromBeginning: true });
    const found: RawRecord[] = [];
    return withTimeout(
      new Promise<typeof found>((resolve) => {
        void reader.run({
          eachMessage: async ({ message }) => {
            found.push({ value: message.value ?? Buffer.alloc(0), headers: headersFromKafka(message.headers) });
            if (done(found)) resolve(found);
          },
        });
      }),
      15_000,
      () => new Error(`Timed out reading ${topic} (${found.length} records)`),
    ).finally(() => reader.disconnect());
  };

  beforeAll(async () => {
    await admin.connect();
    await raw.connect();
    const bus = newBus();
    bus.subscribe(topics.events, `sealed-subscriber-${run}`, async (message) => {
      received.push({ id: message.id, payload: message.payload });
    });
    bus.serve(topics.requests, `sealed-server-${run}`, { echo: async (message) => message.payload });
    await bus.start();
  }, 60_000);

  afterAll(async () => {
    await Promise.allSettled(buses.map((bus) => bus.close()));
    await raw.disconnect();
    const existing = new Set(await admin.listTopics());
    const mine = [...Object.values(topics), ...Object.values(topics).map(deadLetterTopic)].filter((topic) => existing.has(topic));
    await admin.deleteTopics({ topics: mine, timeout: 5_000 }).catch(() => undefined);
    await admin.disconnect();
  }, 30_000);

  it('stores ciphertext on the broker and hands the handler the plaintext, for events and requests alike', async () => {
    const publisher = newBus();
    await publisher.start();
    const id = randomUUID();
    await asTenant(() => publisher.publish(topics.events, { id, type: 'secret', key: 'k', payload: { objective: CANARY } }));
    await until(() => received.some((message) => message.id === id), 'the sealed event');
    expect(received.find((message) => message.id === id)?.payload).toEqual({ objective: CANARY });
    await expect(asTenant(() => publisher.request(topics.requests, 'echo', { comment: CANARY }, { timeoutMs: 10_000 }))).resolves.toEqual({ comment: CANARY });

    const [event] = await records(topics.events, 1);
    const [request] = await records(topics.requests, 1);
    for (const record of [event, request]) {
      expect(record.value.toString('latin1')).not.toContain(CANARY);
      expect(record.value.toString('latin1')).not.toContain('objective');
      expect(record.headers).toMatchObject({ 'tenant-id': TENANT, 'payload-encryption': 'aes-256-gcm' });
      expect(record.headers[PAYLOAD_KEY_HEADER]).toMatch(/^[0-9a-f]{16}:v1\./);
    }
    expect(JSON.stringify(event.headers)).not.toContain(CANARY);
  }, 60_000);

  it('never opens an event of a type the subscriber does not handle: only the handled type is decrypted, and handed over', async () => {
    const inner = sealed();
    const opened: string[] = [];
    const counting: PayloadCodec = {
      encode: (payload, headers) => inner.encode(payload, headers),
      decode: (value, headers) => (opened.push(headers['message-type'] ?? ''), inner.decode(value, headers)),
    };
    const handled: string[] = [];
    const typed = `typed-${run}`;
    const subscriber = newBus(counting);
    subscriber.subscribe(
      topics.events,
      `sealed-typed-${run}`,
      eventHandlers({ [typed]: z.object({ n: z.int() }) }, { [typed]: async (_event, message) => void handled.push(message.id) }),
    );
    await subscriber.start();
    const publisher = newBus();
    await publisher.start();
    const [passedBy, wanted] = [randomUUID(), randomUUID()];
    await asTenant(() => publisher.publish(topics.events, { id: passedBy, type: `other-${run}`, key: 'typed', payload: { n: 1 } }));
    await asTenant(() => publisher.publish(topics.events, { id: wanted, type: typed, key: 'typed', payload: { n: 2 } }));
    await until(() => handled.includes(wanted), 'the handled type behind the other one');
    expect(handled).toEqual([wanted]);
    expect(opened).toEqual([typed]);
  }, 60_000);

  it('refuses a plain payload, one moved to another tenant or message, and one sealed under another KEK: dead-lettered, never handled', async () => {
    const publisher = newBus();
    await publisher.start();
    const original = randomUUID();
    await asTenant(() => publisher.publish(topics.events, { id: original, type: 'secret', key: 'k', payload: { objective: CANARY } }));
    await until(() => received.some((message) => message.id === original), 'the original event');
    const [record] = (await records(topics.events, (found) => found.some((r) => r.headers['message-id'] === original))).filter((found) => found.headers['message-id'] === original);

    const forged = {
      plain: {
        value: Buffer.from(JSON.stringify({ objective: 'plain' })),
        headers: { ...record.headers, 'message-id': randomUUID(), 'payload-encryption': '', 'payload-key': '' },
      },
      otherTenant: { value: record.value, headers: { ...record.headers, 'message-id': original, 'tenant-id': randomUUID() } },
      otherMessage: { value: record.value, headers: { ...record.headers, 'message-id': randomUUID() } },
    };
    const plainHeaders: Record<string, string> = Object.fromEntries(Object.entries(forged.plain.headers).filter(([name]) => !name.startsWith('payload-')));
    const otherKek = newBus(sealedJsonCodec(new TransitCipher(new LocalKeyProvider(KeyEncryptionKey.generate()))));
    await otherKek.start();
    const foreignId = randomUUID();
    await asTenant(() => otherKek.publish(topics.events, { id: foreignId, type: 'secret', key: 'k', payload: { objective: 'foreign' } }));
    await raw.send({
      topic: topics.events,
      messages: [
        { key: 'k', value: forged.plain.value, headers: plainHeaders },
        { key: 'k', value: forged.otherTenant.value, headers: forged.otherTenant.headers },
        { key: 'k', value: forged.otherMessage.value, headers: forged.otherMessage.headers },
      ],
    });
    const behind = randomUUID();
    await asTenant(() => publisher.publish(topics.events, { id: behind, type: 'fine', key: 'k', payload: {} }));
    await until(() => received.some((message) => message.id === behind), 'the event behind the forged ones');

    const handledIds = received.map((message) => message.id);
    expect(handledIds.filter((id) => id === original)).toHaveLength(1);
    for (const id of [plainHeaders['message-id'], forged.otherMessage.headers['message-id'], foreignId]) expect(handledIds).not.toContain(id);
    const dead = await records(deadLetterTopic(topics.events), 4);
    const reasons = dead.map((found) => found.headers.error);
    expect(reasons.filter((reason) => reason.includes('Unencrypted payload refused'))).toHaveLength(1);
    expect(reasons.filter((reason) => reason.includes('DecryptionError'))).toHaveLength(3);
  }, 60_000);
});
