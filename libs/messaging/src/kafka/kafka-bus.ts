import { randomUUID } from 'node:crypto';
import type * as tls from 'node:tls';
import { DomainError, ErrorCode } from '@mission/contracts';
import { optionalTenant, TENANT_HEADER } from '@mission/tenant-context';
import {
  Admin,
  Consumer,
  EachMessagePayload,
  ITopicMetadata,
  Kafka,
  KafkaJSError,
  logCreator,
  logLevel,
  Message,
  Partitioners,
  ProducerConfig,
  ProducerRecord,
} from 'kafkajs';
import {
  BusHealth,
  BusMetrics,
  deadLetterTopic,
  DEFAULT_REQUEST_TIMEOUT_MS,
  DEFAULT_RETRY_POLICY,
  EventHandler,
  HandlerOptions,
  Headers,
  IncomingMessage,
  MessageBus,
  NO_BUS_METRICS,
  OutgoingMessage,
  RequestHandler,
  RequestOptions,
  RetryPolicy,
  Tenancy,
} from '../bus';
import {
  admit,
  answer,
  BusLogger,
  consoleBusLogger,
  defaultRequestKey,
  deliverWithRetries,
  describe,
  outgoingHeaders,
  REFUSED_REPLY,
  ReplyEnvelope,
  requestTimedOut,
  unwrapReply,
} from '../delivery';
import {
  busLogEntry,
  deadLetterHeaders,
  headersFromKafka,
  incomingFromKafka,
  isUnknownTopicError,
  mergeTopicSpecs,
  partitionConcurrency,
  replyTopicName,
  REQUEST_DEADLINE_HEADER,
  requestExpired,
  TopicSpec,
  whileBeating,
  withTimeout,
} from './kafka-mapping';
import { CoalescingSender, ProducerHandle, RenewingProducer } from './producers';
import { PayloadCodec, plainJsonCodec } from '../payload-codec';

export { REQUEST_DEADLINE_HEADER } from './kafka-mapping';
export type { TopicSpec } from './kafka-mapping';

export interface KafkaBusOptions {
  readonly brokers: string[];
  readonly clientId: string;
  readonly ssl?: tls.ConnectionOptions | boolean;
  /** Topics ensured at start (created when missing, never altered). */
  readonly topics?: ReadonlyArray<TopicSpec>;
  readonly retry?: RetryPolicy;
  readonly requestTimeoutMs?: number;
  readonly logger?: BusLogger;
  /** Names this process's reply topic and group; a random id when absent. */
  readonly instanceId?: string;
  /** Longest wait for the broker to acknowledge a publish, reply or dead letter (default 30 s). */
  readonly sendTimeoutMs?: number;
  /** Send and handling latencies, outcomes and consumer lag (none when absent). */
  readonly metrics?: BusMetrics;
  /**
   * How payloads cross the broker (default plain JSON). With `sealedJsonCodec` every body is
   * ciphertext under its tenant's data key, and unsealed bodies are refused.
   */
  readonly codec?: PayloadCodec;
}

/** Consumer session settings: a dead instance loses its partitions within 15 s, rebalances are seen within 1.5 s. */
export const KAFKA_CONSUMER_TIMEOUTS = { sessionTimeout: 15_000, heartbeatInterval: 1_500, rebalanceTimeout: 60_000 } as const;
/** Fetches return after at most this long when there is nothing to read. */
export const KAFKA_MAX_WAIT_MS = 100;
const START_TIMEOUT_MS = 60_000;
const TOPIC_TIMEOUT_MS = 15_000;
const CLEANUP_TIMEOUT_MS = 3_000;
const DEFAULT_SEND_TIMEOUT_MS = 30_000;
/** A consumer that kafkajs stopped for good is replaced after 1 s, doubling up to 30 s while it keeps failing. */
const CONSUMER_REPLACE_DELAY_MS = 1_000;
const CONSUMER_REPLACE_MAX_DELAY_MS = 30_000;

/** Thrown from a consumer callback so kafkajs neither commits the offset nor logs it as a failure. */
class DeliveryInterrupted extends KafkaJSError {
  constructor(topic: string, partition: number, offset: string) {
    super(`Bus is closing: ${topic}[${partition}]@${offset} is left for redelivery`, { retriable: true });
    Object.defineProperty(this, 'name', { value: 'DeliveryInterrupted' });
  }
}

/** Routes kafkajs's own logging to a BusLogger, WARN and above, as structured entries. */
export function kafkaLogCreator(logger: BusLogger): logCreator {
  return () => (entry) => {
    const mapped = busLogEntry(entry);
    if (mapped) logger[mapped.level](mapped.message, mapped.context);
  };
}

function kafkaClient(brokers: string[], clientId: string, ssl: tls.ConnectionOptions | boolean | undefined, logger: BusLogger): Kafka {
  if (brokers.length === 0) throw new Error('Kafka needs at least one broker address');
  return new Kafka({ brokers, clientId, ssl, logLevel: logLevel.WARN, logCreator: kafkaLogCreator(logger) });
}

/** A kafkajs producer that knows whether it is connected. */
function producerHandle(kafka: Kafka, config: ProducerConfig): ProducerHandle<ProducerRecord> {
  const producer = kafka.producer(config);
  let connected = false;
  producer.on(producer.events.CONNECT, () => (connected = true));
  producer.on(producer.events.DISCONNECT, () => (connected = false));
  return {
    connect: () => producer.connect(),
    disconnect: () => producer.disconnect(),
    send: (record) => producer.send(record),
    isConnected: () => connected,
  };
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits until every partition of `names` has a leader; returns their metadata. */
async function waitForLeaders(admin: Admin, names: string[], timeoutMs: number): Promise<ITopicMetadata[]> {
  const deadline = Date.now() + timeoutMs;
  let last = 'no metadata yet';
  for (;;) {
    try {
      const { topics } = await admin.fetchTopicMetadata({ topics: names });
      const ready = names.every((name) => {
        const topic = topics.find((t) => t.name === name);
        return topic !== undefined && topic.partitions.length > 0 && topic.partitions.every((p) => p.leader >= 0 && p.partitionErrorCode === 0);
      });
      if (ready) return topics;
      last = 'a partition has no leader yet';
    } catch (error) {
      last = describe(error);
    }
    if (Date.now() > deadline) throw new Error(`Topics ${names.join(', ')} not ready within ${timeoutMs} ms: ${last}`);
    await sleep(100);
  }
}

/**
 * Creates the topics that are missing and waits until every listed topic has its leaders.
 * "Already exists" is fine (another instance won the race); existing topics are never altered.
 */
async function ensureTopicsWith(admin: Admin, specs: ReadonlyArray<TopicSpec>, logger: BusLogger): Promise<Map<string, number>> {
  const topics = mergeTopicSpecs(specs);
  if (topics.length === 0) return new Map();
  const existing = new Set(await admin.listTopics());
  const missing = topics.filter((topic) => !existing.has(topic.name));
  if (missing.length > 0) {
    // Leaders are awaited below, not here: kafkajs's own wait fails outright when another process
    // created one of these topics a moment ago and its metadata has not reached the broker yet.
    await admin.createTopics({
      topics: missing.map((topic) => ({
        topic: topic.name,
        numPartitions: topic.partitions,
        ...(topic.maxMessageBytes ? { configEntries: [{ name: 'max.message.bytes', value: String(topic.maxMessageBytes) }] } : {}),
      })),
      waitForLeaders: false,
      timeout: TOPIC_TIMEOUT_MS,
    });
  }
  const metadata = await waitForLeaders(
    admin,
    topics.map((topic) => topic.name),
    TOPIC_TIMEOUT_MS,
  );
  const partitions = new Map(metadata.map((topic) => [topic.name, topic.partitions.length]));
  for (const topic of topics) {
    const actual = partitions.get(topic.name) ?? 0;
    if (actual < topic.partitions) {
      logger.warn('Topic has fewer partitions than configured; left as is', { topic: topic.name, configured: topic.partitions, actual });
    }
  }
  return partitions;
}

/** Creates missing topics (with leaders elected) for tooling, tests and deploy scripts. */
export async function ensureTopics(
  brokers: string[],
  topics: ReadonlyArray<TopicSpec>,
  ssl?: tls.ConnectionOptions | boolean,
  logger: BusLogger = consoleBusLogger,
): Promise<void> {
  const admin = kafkaClient(brokers, 'ensure-topics', ssl, logger).admin();
  await admin.connect();
  try {
    await ensureTopicsWith(admin, topics, logger);
  } finally {
    await admin.disconnect();
  }
}

interface PendingRequest {
  /** The tenant the request was sent for: only a reply of the same tenant is read. */
  readonly tenantId: string | undefined;
  readonly resolve: (reply: unknown) => void;
  readonly reject: (error: unknown) => void;
}

type ConsumerStatus = 'joining' | 'up' | 'crashed' | 'disconnected';

interface ConsumerEntry {
  readonly name: string;
  readonly plan: ConsumerPlan;
  /** Replaced when kafkajs gives up on it. */
  consumer: Consumer;
  readonly isReplyConsumer: boolean;
  status: ConsumerStatus;
  detail?: string;
  /** Replacements since it last joined its group (for the backoff). */
  replacements: number;
}

interface ConsumerPlan {
  readonly name: string;
  readonly groupId: string;
  readonly topics: string[];
  readonly isReplyConsumer: boolean;
  readonly concurrency: number;
  readonly eachMessage: (payload: EachMessagePayload) => Promise<void>;
}

type Registration =
  | { readonly kind: 'serve'; readonly group: string; readonly topic: string; readonly tenancy: Tenancy; readonly handlers: Readonly<Record<string, RequestHandler>> }
  | { readonly kind: 'subscribe'; readonly group: string; readonly topic: string; readonly tenancy: Tenancy; readonly handler: EventHandler };

type ServedTopic = Pick<Extract<Registration, { kind: 'serve' }>, 'handlers' | 'tenancy'>;
type SubscribedTopic = Pick<Extract<Registration, { kind: 'subscribe' }>, 'handler' | 'tenancy'>;

/**
 * The MessageBus on Kafka (kafkajs), with the in-process adapter's semantics.
 *
 * - Consumers: one per serving group, one per subscribing group, and one in a group of its own
 *   for this instance's reply topic `replies.<clientId>.<instanceId>`. New groups read from the
 *   beginning; start() resolves once every consumer has its assignment.
 * - Producers: an idempotent one (acks all, murmur2 by key) for requests, events and dead
 *   letters, and a plain one for replies. A request carries its deadline; a server skips it
 *   once the requester has stopped waiting.
 * - Offsets: a request is committed once handled (its reply goes out alongside), an event once
 *   handled or dead-lettered; an event interrupted by close() stays uncommitted and is
 *   redelivered to the group.
 */
export class KafkaBus implements MessageBus {
  readonly replyTopic: string;
  private readonly kafka: Kafka;
  /** Idempotent: requests, events and dead letters. */
  private readonly producer: RenewingProducer<ProducerRecord>;
  private readonly sender: CoalescingSender<Message>;
  /** Plain (a duplicate reply is harmless) and quick to give up: replies, whose topics come and go. */
  private readonly replyProducer: RenewingProducer<ProducerRecord>;
  private readonly registrations: Registration[] = [];
  private readonly consumers: ConsumerEntry[] = [];
  private readonly pending = new Map<string, PendingRequest>();
  private readonly inFlight = new Set<Promise<unknown>>();
  /** Consumers being replaced (see replaceConsumer). */
  private readonly replacing = new Set<Promise<void>>();
  /** Settles when close() begins. */
  private readonly closingSignal: Promise<void>;
  private signalClosing!: () => void;
  private readonly retry: RetryPolicy;
  private readonly requestTimeoutMs: number;
  private readonly sendTimeoutMs: number;
  private readonly logger: BusLogger;
  private readonly metrics: BusMetrics;
  private readonly codec: PayloadCodec;
  private readonly replyGroup: string;
  private state: 'new' | 'starting' | 'started' | 'stopping' | 'stopped' = 'new';
  private starting?: Promise<void>;
  private closing?: Promise<void>;
  /** Settles when start() does: consumers hold their first message until the whole bus is up. */
  private readonly ready: Promise<void>;
  private markReady!: (error?: unknown) => void;

  constructor(private readonly options: KafkaBusOptions) {
    this.retry = options.retry ?? DEFAULT_RETRY_POLICY;
    this.requestTimeoutMs = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    this.sendTimeoutMs = options.sendTimeoutMs ?? DEFAULT_SEND_TIMEOUT_MS;
    this.logger = options.logger ?? consoleBusLogger;
    this.metrics = options.metrics ?? NO_BUS_METRICS;
    this.codec = options.codec ?? plainJsonCodec;
    this.replyTopic = replyTopicName(options.clientId, options.instanceId ?? randomUUID());
    this.replyGroup = this.replyTopic;
    this.kafka = kafkaClient(options.brokers, options.clientId, options.ssl, this.logger);
    const renewed = (error: unknown) => this.logger.warn('Producer replaced after an error it cannot recover from', { error: describe(error) });
    const topicOf = (record: ProducerRecord) => record.topic;
    this.producer = new RenewingProducer({
      create: () =>
        producerHandle(this.kafka, {
          idempotent: true,
          // murmur2 on the key, as the Java client: one key always lands on one partition.
          createPartitioner: Partitioners.DefaultPartitioner,
          allowAutoTopicCreation: false,
        }),
      topicOf,
      onRenew: renewed,
    });
    this.sender = new CoalescingSender((topic, messages) => this.producer.send({ topic, acks: -1, messages }));
    this.replyProducer = new RenewingProducer({
      create: () => producerHandle(this.kafka, { createPartitioner: Partitioners.DefaultPartitioner, allowAutoTopicCreation: false, retry: { retries: 2 } }),
      topicOf,
      onRenew: renewed,
    });
    this.closingSignal = new Promise<void>((resolve) => (this.signalClosing = resolve));
    this.ready = new Promise<void>((resolve, reject) => {
      this.markReady = (error) => (error === undefined ? resolve() : reject(error));
    });
    this.ready.catch(() => undefined);
  }

  serve(topic: string, group: string, handlers: Readonly<Record<string, RequestHandler>>, options: HandlerOptions = {}): void {
    this.assertNotStarted();
    this.assertGroupUsable('serve', topic, group);
    this.registrations.push({ kind: 'serve', group, topic, tenancy: options.tenancy ?? 'tenant', handlers });
  }

  subscribe(topic: string, group: string, handler: EventHandler, options: HandlerOptions = {}): void {
    this.assertNotStarted();
    this.assertGroupUsable('subscribe', topic, group);
    this.registrations.push({ kind: 'subscribe', group, topic, tenancy: options.tenancy ?? 'tenant', handler });
  }

  async start(): Promise<void> {
    this.assertNotStarted();
    if (optionalTenant()) throw new Error('Start the bus outside any tenant context: its consumers would inherit that tenant');
    this.state = 'starting';
    this.starting = this.startAll().then(
      () => {
        this.state = 'started';
        this.markReady();
      },
      async (error: unknown) => {
        this.markReady(error);
        this.state = 'stopping';
        this.signalClosing();
        await this.shutdown();
        this.state = 'stopped';
        throw error;
      },
    );
    return this.starting;
  }

  async request<R>(topic: string, type: string, payload: unknown, options: RequestOptions = {}): Promise<R> {
    this.assertRunning();
    const timeoutMs = options.timeoutMs ?? this.requestTimeoutMs;
    const id = randomUUID();
    const headers = outgoingHeaders(type, id, {
      [Headers.replyTo]: this.replyTopic,
      [REQUEST_DEADLINE_HEADER]: String(Date.now() + timeoutMs),
    });
    const key = options.key ?? defaultRequestKey();
    let body: Awaited<ReturnType<PayloadCodec['encode']>>;
    try {
      body = await this.codec.encode(payload, headers);
    } catch (error) {
      this.logger.error('Request could not be sealed', { topic, type, id, error: describe(error) });
      throw new DomainError(ErrorCode.DependencyUnavailable, `Could not send ${type} to ${topic}`);
    }
    const reply = await new Promise<unknown>((resolve, reject) => {
      const settle = (): boolean => {
        clearTimeout(timer);
        return this.pending.delete(id);
      };
      const timer = setTimeout(() => {
        if (settle()) reject(requestTimedOut(topic, type, timeoutMs));
      }, timeoutMs);
      this.pending.set(id, {
        tenantId: headers[TENANT_HEADER]?.toLowerCase(),
        resolve: (value) => settle() && resolve(value),
        reject: (error) => settle() && reject(error),
      });
      this.send(topic, [{ key, value: body.value, headers: { ...headers, ...body.headers } }]).catch((error: unknown) => {
        this.logger.error('Request could not be sent', { topic, type, id, error: describe(error) });
        this.pending.get(id)?.reject(new DomainError(ErrorCode.DependencyUnavailable, `Could not send ${type} to ${topic}`));
      });
    });
    return unwrapReply<R>(reply);
  }

  async publish(topic: string, message: OutgoingMessage): Promise<void> {
    this.assertRunning();
    const id = message.id ?? randomUUID();
    const headers = outgoingHeaders(message.type, id, message.headers);
    try {
      const body = await this.codec.encode(message.payload, headers);
      await this.send(topic, [{ key: message.key, value: body.value, headers: { ...headers, ...body.headers } }]);
    } catch (error) {
      this.logger.error('Event could not be published', { topic, type: message.type, id, error: describe(error) });
      throw new DomainError(ErrorCode.DependencyUnavailable, `Could not publish ${message.type} to ${topic}`);
    }
  }

  close(): Promise<void> {
    this.closing ??= this.closeOnce();
    return this.closing;
  }

  health(): BusHealth {
    if (this.state !== 'started') return { up: false, detail: `kafka bus is ${this.state}` };
    const problems: string[] = [];
    if (!this.producer.isConnected()) problems.push('producer disconnected');
    if (!this.replyProducer.isConnected()) problems.push('reply producer disconnected');
    for (const entry of this.consumers) {
      if (entry.status !== 'up') problems.push(`${entry.name} ${entry.status}${entry.detail ? ` (${entry.detail})` : ''}`);
    }
    return problems.length === 0 ? { up: true } : { up: false, detail: problems.join('; ') };
  }

  // --- start and stop -------------------------------------------------------------------

  private async startAll(): Promise<void> {
    const configured = this.options.topics ?? [];
    const partitionsOf = new Map(mergeTopicSpecs(configured).map((topic) => [topic.name, topic.partitions]));
    const consumed = [...new Set(this.registrations.map((r) => r.topic))];

    const admin = this.kafka.admin();
    await admin.connect();
    let partitions: Map<string, number>;
    try {
      partitions = await ensureTopicsWith(
        admin,
        [
          ...configured,
          // Requests are dead-lettered too when refused (no tenant), so every consumed topic has its DLQ.
          ...consumed.map((topic) => ({ name: deadLetterTopic(topic), partitions: partitionsOf.get(topic) ?? 1 })),
          { name: this.replyTopic, partitions: 1 },
        ],
        this.logger,
      );
      const unknown = consumed.filter((topic) => !partitions.has(topic));
      if (unknown.length > 0) {
        const existing = new Set(await admin.listTopics());
        const missing = unknown.filter((topic) => !existing.has(topic));
        if (missing.length > 0) throw new Error(`Topics ${missing.join(', ')} do not exist; list them in the bus options' topics`);
        for (const topic of await waitForLeaders(admin, unknown, TOPIC_TIMEOUT_MS)) partitions.set(topic.name, topic.partitions.length);
      }
    } finally {
      await admin.disconnect();
    }

    await Promise.all([this.producer.connect(), this.replyProducer.connect()]);

    const plans: ConsumerPlan[] = [{
      name: 'reply consumer',
      groupId: this.replyGroup,
      topics: [this.replyTopic],
      isReplyConsumer: true,
      concurrency: 1,
      eachMessage: (payload) => this.onReply(payload),
    }];
    for (const [group, registrations] of this.groups('serve')) {
      const handlers = new Map<string, ServedTopic>(registrations.map((r) => [r.topic, { handlers: r.handlers, tenancy: r.tenancy }]));
      plans.push({
        name: `serve ${group}`,
        groupId: group,
        topics: [...handlers.keys()],
        isReplyConsumer: false,
        concurrency: partitionConcurrency(Math.max(...[...handlers.keys()].map((topic) => partitions.get(topic) ?? 1))),
        eachMessage: (payload) => this.onRequest(payload, group, handlers),
      });
    }
    for (const [group, registrations] of this.groups('subscribe')) {
      const handlers = new Map<string, SubscribedTopic>(registrations.map((r) => [r.topic, { handler: r.handler, tenancy: r.tenancy }]));
      plans.push({
        name: `subscribe ${group}`,
        groupId: group,
        topics: [...handlers.keys()],
        isReplyConsumer: false,
        concurrency: partitionConcurrency(Math.max(...[...handlers.keys()].map((topic) => partitions.get(topic) ?? 1))),
        eachMessage: (payload) => this.onEvent(payload, group, handlers),
      });
    }
    await Promise.all(plans.map((plan) => this.startConsumer(plan)));
  }

  /** Registrations of one kind by group: a group reads all its topics through one consumer. */
  private groups<K extends Registration['kind']>(kind: K): Map<string, Array<Extract<Registration, { kind: K }>>> {
    const groups = new Map<string, Array<Extract<Registration, { kind: K }>>>();
    for (const registration of this.registrations) {
      if (registration.kind !== kind) continue;
      const typed = registration as Extract<Registration, { kind: K }>;
      groups.set(typed.group, [...(groups.get(typed.group) ?? []), typed]);
    }
    return groups;
  }

  /** Connects, subscribes and runs one consumer; resolves once it has joined its group. */
  private async startConsumer(plan: ConsumerPlan): Promise<void> {
    const entry: ConsumerEntry = { name: plan.name, plan, consumer: this.newConsumer(plan), isReplyConsumer: plan.isReplyConsumer, status: 'joining', replacements: 0 };
    this.consumers.push(entry);
    await withTimeout(this.runConsumer(entry), START_TIMEOUT_MS, () => new Error(`${plan.name} did not join group ${plan.groupId} within ${START_TIMEOUT_MS} ms`));
  }

  private newConsumer(plan: ConsumerPlan): Consumer {
    return this.kafka.consumer({
      groupId: plan.groupId,
      ...KAFKA_CONSUMER_TIMEOUTS,
      maxWaitTimeInMs: KAFKA_MAX_WAIT_MS,
      allowAutoTopicCreation: false,
    });
  }

  /**
   * Runs the entry's consumer; resolves once it has joined its group. kafkajs restarts a consumer
   * itself after retriable failures; one it gives up on (a crash without restart) is replaced
   * here by a fresh consumer after a backoff, for as long as the bus runs, so that no outage
   * leaves a group without its member for good.
   */
  private async runConsumer(entry: ConsumerEntry): Promise<void> {
    const { consumer, plan } = entry;
    const joined = new Promise<void>((resolve, reject) => {
      consumer.on(consumer.events.GROUP_JOIN, () => {
        this.metrics.assigned(plan.groupId);
        entry.status = 'up';
        entry.detail = undefined;
        entry.replacements = 0;
        resolve();
      });
      consumer.on(consumer.events.CRASH, (event) => {
        if (entry.consumer !== consumer) return;
        entry.status = 'crashed';
        entry.detail = describe(event.payload.error);
        if (event.payload.restart) return;
        reject(event.payload.error);
        if (this.state === 'started') this.replaceConsumer(entry, consumer);
        else this.logger.error('Consumer stopped for good', { consumer: plan.name, group: plan.groupId, error: entry.detail });
      });
      consumer.on(consumer.events.END_BATCH_PROCESS, ({ payload }) => {
        this.metrics.lag(payload.topic, plan.groupId, payload.partition, Number(payload.offsetLag));
      });
      consumer.on(consumer.events.DISCONNECT, () => {
        if (entry.consumer === consumer && entry.status !== 'crashed') entry.status = 'disconnected';
        reject(new Error(`${plan.name} disconnected`));
      });
    });
    joined.catch(() => undefined);
    await consumer.connect();
    await consumer.subscribe({ topics: plan.topics, fromBeginning: true });
    await consumer.run({ partitionsConsumedConcurrently: plan.concurrency, eachMessage: plan.eachMessage });
    await joined;
  }

  private replaceConsumer(entry: ConsumerEntry, failed: Consumer): void {
    const delayMs = Math.min(CONSUMER_REPLACE_MAX_DELAY_MS, CONSUMER_REPLACE_DELAY_MS * 2 ** entry.replacements);
    entry.replacements++;
    this.logger.error('Consumer stopped by kafkajs; replacing it', { consumer: entry.name, group: entry.plan.groupId, error: entry.detail, inMs: delayMs });
    const replacing = (async () => {
      await failed.disconnect().catch(() => undefined);
      // close() cuts the wait short.
      await Promise.race([sleep(delayMs), this.closingSignal]);
      if (this.state !== 'started' || entry.consumer !== failed) return;
      const replacement = this.newConsumer(entry.plan);
      entry.consumer = replacement;
      entry.status = 'joining';
      try {
        await this.runConsumer(entry);
      } catch (error) {
        if (this.isStopping() || entry.consumer !== replacement) return;
        // A crash while joining has scheduled the next replacement already (the CRASH listener);
        // a failed connect or subscribe reports no crash, so it is retried from here.
        if ((entry.status as ConsumerStatus) === 'crashed') return;
        entry.status = 'crashed';
        entry.detail = describe(error);
        this.replaceConsumer(entry, replacement);
      }
    })().finally(() => this.replacing.delete(replacing));
    // close() waits for it, then disconnects whatever consumer the entry ended up with.
    this.replacing.add(replacing);
  }

  private async closeOnce(): Promise<void> {
    if (this.state === 'new') {
      this.state = 'stopped';
      return;
    }
    await this.starting?.catch(() => undefined);
    if (this.state === 'stopped') return;
    this.state = 'stopping';
    this.signalClosing();
    await this.shutdown();
    this.state = 'stopped';
  }

  /** Stops taking messages, lets the ones in flight finish, then disconnects and cleans up. */
  private async shutdown(): Promise<void> {
    const disconnect = async (entries: ConsumerEntry[]): Promise<void> => {
      await Promise.allSettled(entries.map((entry) => entry.consumer.disconnect()));
    };
    // Handlers in flight may still await replies to their own requests: the reply consumer goes last.
    await disconnect(this.consumers.filter((entry) => !entry.isReplyConsumer));
    // A replacement that was connecting may have connected after that: disconnect it again.
    while (this.replacing.size > 0) await Promise.allSettled([...this.replacing]);
    await disconnect(this.consumers.filter((entry) => !entry.isReplyConsumer));
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
    await disconnect(this.consumers.filter((entry) => entry.isReplyConsumer));
    for (const pending of [...this.pending.values()]) {
      pending.reject(new DomainError(ErrorCode.DependencyUnavailable, 'The message bus closed before the answer arrived'));
    }
    await Promise.all(
      [this.producer, this.replyProducer].map((producer) =>
        producer.disconnect().catch((error: unknown) => this.logger.warn('Producer did not disconnect cleanly', { error: describe(error) })),
      ),
    );
    await this.removeReplyTopic();
  }

  /** Best effort: a left-over reply topic or group only costs the broker a little space. */
  private async removeReplyTopic(): Promise<void> {
    const admin = this.kafka.admin();
    const cleanup = async (): Promise<void> => {
      await admin.connect();
      await admin.deleteTopics({ topics: [this.replyTopic], timeout: CLEANUP_TIMEOUT_MS });
      await admin.deleteGroups([this.replyGroup]).catch(() => undefined);
    };
    try {
      await withTimeout(cleanup(), CLEANUP_TIMEOUT_MS, () => new Error(`timed out after ${CLEANUP_TIMEOUT_MS} ms`));
    } catch (error) {
      this.logger.warn('Reply topic not removed', { topic: this.replyTopic, error: describe(error) });
    } finally {
      await admin.disconnect().catch(() => undefined);
    }
  }

  // --- consumer callbacks ---------------------------------------------------------------

  private async onReply({ message }: EachMessagePayload): Promise<void> {
    const headers = headersFromKafka(message.headers);
    const pending = this.pending.get(headers[Headers.correlationId] ?? '');
    if (!pending) return; // the requester gave up already
    let reply: unknown;
    try {
      if (headers[TENANT_HEADER]?.toLowerCase() !== pending.tenantId) throw new Error('The reply names another tenant than its request');
      reply = await this.codec.decode(message.value, headers);
    } catch (error) {
      this.logger.error('Unreadable reply', { correlationId: headers[Headers.correlationId], error: describe(error) });
      reply = undefined; // unwrapReply turns it into internal_error
    }
    pending.resolve(reply);
  }

  private async onRequest(payload: EachMessagePayload, group: string, servedTopics: ReadonlyMap<string, ServedTopic>): Promise<void> {
    const { topic, partition, message, heartbeat } = payload;
    await this.admit(topic, partition, message.offset);
    const started = performance.now();
    await this.track(async () => {
      const headers = headersFromKafka(message.headers);
      const replyTo = headers[Headers.replyTo];
      const correlationId = headers[Headers.correlationId];
      if (requestExpired(headers)) {
        this.logger.warn('Request skipped: its requester stopped waiting', { topic, type: headers[Headers.messageType], id: headers[Headers.messageId] });
        this.metrics.handled(topic, group, (performance.now() - started) / 1000, 'skipped');
        return;
      }
      let reply: ReplyEnvelope;
      const served = servedTopics.get(topic);
      const admission = admit(headers, served?.tenancy ?? 'tenant', { topic, group, system: 'kafka' });
      try {
        if (!admission.admitted) {
          await this.deadLetter(topic, group, message, admission.refusal, 0);
          reply = REFUSED_REPLY;
        } else {
          const request: IncomingMessage = { ...incomingFromKafka(topic, partition, message, await this.codec.decode(message.value, headers)), attempt: 1 };
          const handler = served?.handlers[request.type];
          reply = await whileBeating(heartbeat, KAFKA_CONSUMER_TIMEOUTS.heartbeatInterval, () => answer(request, handler, this.logger, admission.scope));
        }
      } catch (error) {
        this.logger.error('Unreadable request', { topic, partition, offset: message.offset, error: describe(error) });
        reply = { ok: false, error: { code: ErrorCode.Internal, message: 'internal error' } };
      }
      this.metrics.handled(topic, group, (performance.now() - started) / 1000, !admission.admitted ? 'refused' : reply.ok ? 'ok' : 'error');
      if (!replyTo || !correlationId) {
        this.logger.warn('Request without reply-to or correlation-id: answer dropped', { topic, type: headers[Headers.messageType] });
        return;
      }
      // Not awaited by the partition: a reply to a requester that has gone (its topic deleted)
      // takes the producer seconds to give up, and must not hold up the requests behind it.
      // close() still waits for it.
      void this.track(() => this.sendReply(replyTo, message.key, correlationId, reply, headers[TENANT_HEADER]));
    });
  }

  private async onEvent(payload: EachMessagePayload, group: string, subscribedTopics: ReadonlyMap<string, SubscribedTopic>): Promise<void> {
    const { topic, partition, message, heartbeat } = payload;
    await this.admit(topic, partition, message.offset);
    const subscription = subscribedTopics.get(topic);
    if (!subscription) throw new Error(`Group ${group} got a message of ${topic}, which it does not subscribe to`);
    const started = performance.now();
    const seconds = () => (performance.now() - started) / 1000;
    await this.track(async () => {
      const headers = headersFromKafka(message.headers);
      // Refused for its tenant header before its body is read: the reason is the header, not the key.
      const admission = admit(headers, subscription.tenancy);
      if (!admission.admitted) {
        await this.deadLetter(topic, group, message, admission.refusal, 0);
        this.metrics.handled(topic, group, seconds(), 'refused');
        return;
      }
      let event: Omit<IncomingMessage, 'attempt'>;
      try {
        event = incomingFromKafka(topic, partition, message, await this.codec.decode(message.value, headers));
      } catch (error) {
        await this.deadLetter(topic, group, message, error, 1);
        this.metrics.handled(topic, group, seconds(), 'dead-lettered');
        return;
      }
      const delivery = await whileBeating(heartbeat, KAFKA_CONSUMER_TIMEOUTS.heartbeatInterval, () =>
        deliverWithRetries(event, subscription.handler, this.retry, () => this.isStopping(), heartbeat, subscription.tenancy, { topic, group, system: 'kafka' }),
      );
      if (delivery.outcome === 'interrupted') throw new DeliveryInterrupted(topic, partition, message.offset);
      if (delivery.outcome === 'failed') await this.deadLetter(topic, group, message, delivery.error, delivery.attempts);
      if (delivery.outcome === 'refused') await this.deadLetter(topic, group, message, delivery.error, 0);
      this.metrics.handled(topic, group, seconds(), delivery.outcome === 'failed' ? 'dead-lettered' : delivery.outcome === 'refused' ? 'refused' : 'ok');
    });
  }

  /** Holds a message until start() has finished; refuses it (uncommitted) once closing. */
  private async admit(topic: string, partition: number, offset: string): Promise<void> {
    await this.ready;
    if (this.isStopping()) throw new DeliveryInterrupted(topic, partition, offset);
  }

  /** A reply carries its request's tenant, so it is sealed under (and bound to) the same tenant's key. */
  private async sendReply(replyTo: string, key: Buffer | null, correlationId: string, reply: ReplyEnvelope, tenantId: string | undefined): Promise<void> {
    const headers = outgoingHeaders('reply', randomUUID(), {
      [Headers.correlationId]: correlationId,
      [Headers.replyStatus]: reply.ok ? 'ok' : 'error',
      ...(tenantId ? { [TENANT_HEADER]: tenantId } : {}),
    });
    try {
      const body = await this.codec.encode(reply, headers);
      await withTimeout(
        this.replyProducer.send({ topic: replyTo, acks: -1, messages: [{ key, value: body.value, headers: { ...headers, ...body.headers } }] }),
        this.sendTimeoutMs,
        () => new Error(`Kafka did not acknowledge a reply to ${replyTo} within ${this.sendTimeoutMs} ms`),
      );
    } catch (error) {
      if (isUnknownTopicError(error)) this.logger.warn('Reply dropped: the requester has gone', { replyTo, correlationId });
      else this.logger.error('Reply could not be sent', { replyTo, correlationId, error: describe(error) });
    }
  }

  /** Parks a message that kept failing (or was refused: 0 attempts) in `<topic>.dlq`; if that fails too, the message is redelivered. */
  private async deadLetter(topic: string, group: string, message: EachMessagePayload['message'], error: unknown, attempts: number): Promise<void> {
    const headers = headersFromKafka(message.headers);
    this.logger.error('Message dead-lettered', {
      topic,
      group,
      type: headers[Headers.messageType],
      id: headers[Headers.messageId],
      offset: message.offset,
      attempts,
      error: describe(error),
    });
    await this.send(deadLetterTopic(topic), [{ key: message.key, value: message.value, headers: deadLetterHeaders(headers, error, attempts) }]);
  }

  private send(topic: string, messages: Message[]): Promise<unknown> {
    const started = performance.now();
    // The idempotent producer retries without end while the broker is away: bound the wait.
    return withTimeout(
      this.sender.send(topic, messages),
      this.sendTimeoutMs,
      () => new Error(`Kafka did not acknowledge a send to ${topic} within ${this.sendTimeoutMs} ms`),
    ).then(
      (result) => {
        this.metrics.sent(topic, (performance.now() - started) / 1000, true);
        return result;
      },
      (error: unknown) => {
        this.metrics.sent(topic, (performance.now() - started) / 1000, false);
        throw error;
      },
    );
  }

  private track(work: () => Promise<void>): Promise<void> {
    const promise = work();
    this.inFlight.add(promise);
    return promise.finally(() => this.inFlight.delete(promise));
  }

  private isStopping(): boolean {
    return this.state === 'stopping' || this.state === 'stopped';
  }

  private assertGroupUsable(kind: Registration['kind'], topic: string, group: string): void {
    for (const other of this.registrations) {
      if (other.group !== group) continue;
      // One consumer reads all topics of a group (kafkajs's assigner gives every member partitions
      // of every topic the group reads), so a group either serves or subscribes, each topic once.
      if (other.kind !== kind) throw new Error(`Group ${group} already ${other.kind === 'serve' ? 'serves' : 'subscribes to'} ${other.topic}: use separate groups to serve and to subscribe`);
      if (other.topic === topic) throw new Error(`Group ${group} already ${kind === 'serve' ? 'serves' : 'subscribes to'} ${topic}`);
    }
  }

  private assertNotStarted(): void {
    if (this.state !== 'new') throw new Error('Register handlers and start the bus only once, before it runs');
  }

  private assertRunning(): void {
    if (this.state !== 'started') throw new DomainError(ErrorCode.DependencyUnavailable, 'The message bus is not running');
  }
}
