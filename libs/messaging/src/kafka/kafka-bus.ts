import { randomUUID } from 'node:crypto';
import type * as tls from 'node:tls';
import { DomainError, ErrorCode } from '@mission/contracts';
import { optionalTenant, TENANT_HEADER } from '@mission/tenant-context';
import { EachBatchPayload, Kafka, KafkaJSError, KafkaMessage, Message, ProducerBatch, SASLOptions } from 'kafkajs';
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
  isIgnored,
  isReplyTopic,
  outgoingHeaders,
  REFUSED_REPLY,
  ReplyEnvelope,
  REQUEST_DEADLINE_HEADER,
  requestExpired,
  unwrapReply,
} from '../delivery';
import { DEFAULT_MAX_IN_FLIGHT, Dispatcher, InFlightLimit } from '../dispatch';
import { PayloadCodec, plainJsonCodec } from '../payload-codec';
import { PendingReplies } from '../replies';
import { ensureTopicsWith, kafkaClient, producerHandle, waitForLeaders } from './client';
import { ConsumerFleet, ConsumerPlan, KAFKA_CONSUMER_TIMEOUTS, partitionId } from './consumers';
import {
  deadLetterHeaders,
  headersFromKafka,
  incomingFromKafka,
  isUnknownTopicError,
  mergeTopicSpecs,
  partitionConcurrency,
  replyTopicName,
  TopicSpec,
  whileBeating,
  withTimeout,
} from './kafka-mapping';
import { murmur2Partitioner } from './partitioner';
import { BatchingSender, RenewingProducer } from './producers';

export { ensureTopics, kafkaClient, kafkaLogCreator } from './client';
export { KAFKA_CONSUMER_TIMEOUTS, KAFKA_MAX_WAIT_MS } from './consumers';
export { REQUEST_DEADLINE_HEADER } from './kafka-mapping';
export type { TopicSpec } from './kafka-mapping';

export interface KafkaBusOptions {
  readonly brokers: string[];
  readonly clientId: string;
  readonly ssl?: tls.ConnectionOptions | boolean;
  /**
   * How this process signs in (SASL/SCRAM or PLAIN): its own principal, which the broker's ACLs
   * allow only its own topics and groups (see `platformAcls`).
   */
  readonly sasl?: SASLOptions;
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
  /**
   * Request handlers, and separately event handlers, running at once in this process over all its
   * groups (default 64 each); more wait, and so does their consumer's next fetch.
   */
  readonly maxInFlight?: number;
}

const TOPIC_TIMEOUT_MS = 15_000;
const CLEANUP_TIMEOUT_MS = 3_000;
const DEFAULT_SEND_TIMEOUT_MS = 30_000;
/** Reply topics of different requesters are sent to side by side, each one batch at a time. */
const REPLY_SENDS_IN_FLIGHT = 8;
/** The topic and group label of replies in the metrics: a reply topic is named after its instance. */
const REPLIES_LABEL = 'replies';

/** Thrown from a consumer callback so kafkajs neither commits the offset nor logs it as a failure. */
class DeliveryInterrupted extends KafkaJSError {
  constructor(topic: string, partition: number, offset: string) {
    super(`Bus is closing: ${topic}[${partition}]@${offset} is left for redelivery`, { retriable: true });
    Object.defineProperty(this, 'name', { value: 'DeliveryInterrupted' });
  }
}

type Registration =
  | { readonly kind: 'serve'; readonly group: string; readonly topic: string; readonly tenancy: Tenancy; readonly handlers: Readonly<Record<string, RequestHandler>> }
  | { readonly kind: 'subscribe'; readonly group: string; readonly topic: string; readonly tenancy: Tenancy; readonly handler: EventHandler; readonly broadcast: boolean };

/** A fetched record, as a Dispatcher takes it. */
interface Fetched {
  readonly topic: string;
  readonly partition: number;
  readonly offset: string;
  readonly message: KafkaMessage;
}

/**
 * Offsets are committed at most this often per group (and at once when the bus closes). A commit
 * waits on the consumer's connection behind its fetch, so one per message would slow every
 * request; a crash redelivers at most this much more, to idempotent consumers, and requests
 * redelivered after a crash are past their deadline (the session timeout is longer) and skipped.
 */
const COMMIT_INTERVAL_MS = 200;

/** Messages taken (running or queued behind their key) per running slot, before fetching waits. */
const TAKEN_PER_RUNNING = 4;

interface HandlerLimits {
  readonly running: InFlightLimit;
  readonly taken: InFlightLimit;
}

/** After a handler failed (its dead letter could not be sent), reading resumes there after this long. */
const REWIND_DELAY_MS = 1_000;

type ServedTopic = Pick<Extract<Registration, { kind: 'serve' }>, 'handlers' | 'tenancy'>;
type SubscribedTopic = Pick<Extract<Registration, { kind: 'subscribe' }>, 'handler' | 'tenancy'>;

/**
 * The MessageBus on Kafka (kafkajs), with the in-process adapter's semantics.
 *
 * - Consumers (see ConsumerFleet): one per serving group, one per subscribing group, and one in a
 *   group of its own for this instance's reply topic `replies.<clientId>.<instanceId>`. New groups
 *   read from the beginning; start() resolves once every consumer has its assignment.
 * - Handling (see Dispatcher): requests run concurrently, events in order per key and keys
 *   concurrently, bounded per process (requests and events each); a slow handler holds up
 *   nothing but its own key. Offsets are committed up to the lowest message not yet finished;
 *   an event interrupted by close() stays uncommitted and is redelivered to the group.
 * - Producers: an idempotent one (acks all, murmur2 by key) for requests, events, dead letters
 *   and replies to durable topics, and a plain one for replies to requesters. Sends of one turn
 *   of the event loop go out together (BatchingSender). A request carries its deadline; a server
 *   skips it once the requester has stopped waiting.
 */
export class KafkaBus implements MessageBus {
  readonly replyTopic: string;
  private readonly kafka: Kafka;
  /** Idempotent: requests, events, dead letters and replies to durable topics. */
  private readonly producer: RenewingProducer<ProducerBatch>;
  private readonly sender: BatchingSender<Message>;
  /** Plain (a duplicate reply is harmless) and quick to give up: replies, whose topics come and go. */
  private readonly replyProducer: RenewingProducer<ProducerBatch>;
  private readonly replySender: BatchingSender<Message>;
  private readonly registrations: Registration[] = [];
  private readonly fleet: ConsumerFleet;
  /** One per serving or subscribing group. */
  private readonly dispatchers: Array<Dispatcher<Fetched>> = [];
  private readonly replies: PendingReplies;
  /** Requests and events each have their own slots: an event handler awaiting a request never starves it. */
  private readonly limits: { readonly requests: HandlerLimits; readonly events: HandlerLimits };
  /** Reply sends not awaited by their handler; close() waits for them. */
  private readonly inFlight = new Set<Promise<unknown>>();
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
  /** This process's instance: its reply topic and its broadcast groups are named after it. */
  private readonly instanceId: string;
  private state: 'new' | 'starting' | 'started' | 'stopping' | 'stopped' = 'new';
  private starting?: Promise<void>;
  private closing?: Promise<void>;
  /** Settles when start() does: consumers hold their first batch until the whole bus is up. */
  private readonly ready: Promise<void>;
  private markReady!: (error?: unknown) => void;

  constructor(private readonly options: KafkaBusOptions) {
    this.retry = options.retry ?? DEFAULT_RETRY_POLICY;
    this.requestTimeoutMs = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    this.sendTimeoutMs = options.sendTimeoutMs ?? DEFAULT_SEND_TIMEOUT_MS;
    this.logger = options.logger ?? consoleBusLogger;
    this.metrics = options.metrics ?? NO_BUS_METRICS;
    this.codec = options.codec ?? plainJsonCodec;
    const maxInFlight = options.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT;
    const limits = (): HandlerLimits => ({ running: new InFlightLimit(maxInFlight), taken: new InFlightLimit(maxInFlight * TAKEN_PER_RUNNING) });
    this.limits = { requests: limits(), events: limits() };
    this.replies = new PendingReplies(this.logger);
    this.instanceId = options.instanceId ?? randomUUID();
    this.replyTopic = replyTopicName(options.clientId, this.instanceId);
    this.replyGroup = this.replyTopic;
    this.kafka = kafkaClient(options.brokers, options.clientId, options.ssl, this.logger, options.sasl);
    const renewed = (error: unknown) => this.logger.warn('Producer replaced after an error it cannot recover from', { error: describe(error) });
    const topicOf = (record: ProducerBatch) => (record.topicMessages?.length === 1 ? record.topicMessages[0].topic : undefined);
    this.producer = new RenewingProducer({
      create: () =>
        producerHandle(this.kafka, {
          idempotent: true,
          // murmur2 on the key, as the Java client: one key always lands on one partition.
          createPartitioner: murmur2Partitioner,
          allowAutoTopicCreation: false,
        }),
      topicOf,
      onRenew: renewed,
    });
    this.sender = new BatchingSender((topicMessages) => this.producer.send({ topicMessages, acks: -1 }));
    this.replyProducer = new RenewingProducer({
      create: () => producerHandle(this.kafka, { createPartitioner: murmur2Partitioner, allowAutoTopicCreation: false, retry: { retries: 2 } }),
      topicOf,
      onRenew: renewed,
    });
    this.replySender = new BatchingSender((topicMessages) => this.replyProducer.send({ topicMessages, acks: -1 }), { perTopic: true, maxInFlight: REPLY_SENDS_IN_FLIGHT });
    this.closingSignal = new Promise<void>((resolve) => (this.signalClosing = resolve));
    this.fleet = new ConsumerFleet(this.kafka, this.logger, this.metrics, () => this.state === 'started', this.closingSignal);
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
    const broadcast = options.broadcast ?? false;
    // A broadcast group is this instance's alone: every instance reads every event.
    const ownGroup = broadcast ? `${group}.${this.instanceId}` : group;
    this.assertGroupUsable('subscribe', topic, ownGroup);
    this.registrations.push({ kind: 'subscribe', group: ownGroup, topic, tenancy: options.tenancy ?? 'tenant', handler, broadcast });
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
    const started = performance.now();
    let reply: unknown;
    try {
      const timeoutMs = options.timeoutMs ?? this.requestTimeoutMs;
      const id = randomUUID();
      const headers = outgoingHeaders(type, id, {
        [Headers.replyTo]: this.replyTopic,
        [REQUEST_DEADLINE_HEADER]: String(Date.now() + timeoutMs),
      });
      let body: Awaited<ReturnType<PayloadCodec['encode']>>;
      try {
        body = await this.codec.encode(payload, headers);
      } catch (error) {
        this.logger.error('Request could not be sealed', { topic, type, id, error: describe(error) });
        throw new DomainError(ErrorCode.DependencyUnavailable, `Could not send ${type} to ${topic}`);
      }
      const message: Message = { key: options.key ?? defaultRequestKey(), value: body.value, headers: { ...headers, ...body.headers } };
      reply = await this.replies.wait(id, headers[TENANT_HEADER], timeoutMs, { topic, type }, () =>
        this.send(topic, [message]).catch((error: unknown) => {
          this.logger.error('Request could not be sent', { topic, type, id, error: describe(error) });
          throw new DomainError(ErrorCode.DependencyUnavailable, `Could not send ${type} to ${topic}`);
        }),
      );
    } finally {
      this.metrics.requested(topic, (performance.now() - started) / 1000, reply !== undefined);
    }
    return unwrapReply<R>(reply);
  }

  publish(topic: string, message: OutgoingMessage): Promise<void> {
    return this.publishAll([{ topic, message }]);
  }

  async publishAll(items: ReadonlyArray<{ readonly topic: string; readonly message: OutgoingMessage }>): Promise<void> {
    this.assertRunning();
    const records = await Promise.all(
      items.map(async ({ topic, message }) => {
        const id = message.id ?? randomUUID();
        const headers = outgoingHeaders(message.type, id, message.headers);
        try {
          const body = await this.codec.encode(message.payload, headers);
          return { topic, message, id, record: { key: message.key, value: body.value, headers: { ...headers, ...body.headers } } };
        } catch (error) {
          this.logger.error('Event could not be sealed', { topic, type: message.type, id, error: describe(error) });
          throw new DomainError(ErrorCode.DependencyUnavailable, `Could not publish ${message.type} to ${topic}`);
        }
      }),
    );
    // Handed to the sender in call order, in one turn: one aggregate's events keep their order.
    const sends = records.map(({ topic, message, id, record }) =>
      this.send(topic, [record]).catch((error: unknown) => {
        this.logger.error('Event could not be published', { topic, type: message.type, id, error: describe(error) });
        throw new DomainError(ErrorCode.DependencyUnavailable, `Could not publish ${message.type} to ${topic}`);
      }),
    );
    const outcomes = await Promise.allSettled(sends);
    const failed = outcomes.find((outcome): outcome is PromiseRejectedResult => outcome.status === 'rejected');
    if (failed) throw failed.reason;
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
    problems.push(...this.fleet.problems());
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

    const concurrencyOf = (topics: Iterable<string>) => partitionConcurrency(Math.max(...[...topics].map((topic) => partitions.get(topic) ?? 1)));
    const plans: ConsumerPlan[] = [
      {
        name: 'reply consumer',
        groupId: this.replyGroup,
        topics: [this.replyTopic],
        isReplyConsumer: true,
        concurrency: 1,
        // Nothing to commit: the group and its topic live as long as this instance, and a
        // reply read again after a rejoin finds no request waiting. Committing after each batch
        // would hold the next fetch for a round trip.
        autoCommit: false,
        eachBatch: (payload) => this.onReplies(payload),
      },
    ];
    for (const [group, registrations] of this.groups('serve')) {
      const served = new Map<string, ServedTopic>(registrations.map((r) => [r.topic, { handlers: r.handlers, tenancy: r.tenancy }]));
      plans.push(
        this.dispatchingPlan(`serve ${group}`, group, [...served.keys()], concurrencyOf(served.keys()), this.limits.requests, (fetched) => this.onRequest(fetched, group, served)),
      );
    }
    for (const [group, registrations] of this.groups('subscribe')) {
      const subscribed = new Map<string, SubscribedTopic>(registrations.map((r) => [r.topic, { handler: r.handler, tenancy: r.tenancy }]));
      const plan = this.dispatchingPlan(
        `subscribe ${group}`,
        group,
        [...subscribed.keys()],
        concurrencyOf(subscribed.keys()),
        this.limits.events,
        (fetched) => this.onEvent(fetched, group, subscribed),
        (fetched) => fetched.message.key?.toString('utf8') ?? '',
      );
      // A broadcast group is new with each instance: it starts at the end of its topics.
      plans.push(registrations.some((r) => r.broadcast) ? { ...plan, fromBeginning: false } : plan);
    }
    await Promise.all(plans.map((plan) => this.fleet.start(plan)));
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
    await this.fleet.stop(
      async () => {
        await Promise.all(this.dispatchers.map((dispatcher) => dispatcher.drain()));
      },
      async () => {
        while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
      },
    );
    this.replies.rejectAll();
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
      const broadcastGroups = this.registrations.filter((r) => r.kind === 'subscribe' && r.broadcast).map((r) => r.group);
      await admin.deleteGroups([this.replyGroup, ...new Set(broadcastGroups)]).catch(() => undefined);
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

  /** Every reply of the batch at once: they need no order, and none waits for a handler slot. */
  private async onReplies({ batch, resolveOffset }: EachBatchPayload): Promise<void> {
    const now = Date.now();
    await Promise.all(
      batch.messages.map((message) => {
        this.recordDelivery(REPLIES_LABEL, REPLIES_LABEL, message, now);
        const headers = headersFromKafka(message.headers);
        return this.replies.deliver(headers, () => this.codec.decode(message.value, headers));
      }),
    );
    if (batch.messages.length > 0) resolveOffset(batch.lastOffset());
  }

  /**
   * The consumer of a serving or subscribing group: each fetched record is handed to the group's
   * Dispatcher, which runs it beside the others and commits as they finish. The batch callback
   * returns as soon as its records are taken, so the next fetch does not wait for slow handlers,
   * only for room under the in-flight limit.
   */
  private dispatchingPlan(
    name: string,
    group: string,
    topics: string[],
    concurrency: number,
    limit: HandlerLimits,
    handle: (fetched: Fetched) => Promise<void>,
    orderKey?: (fetched: Fetched) => string,
  ): ConsumerPlan {
    const rewinding = new Set<string>();
    const dispatcher: Dispatcher<Fetched> = new Dispatcher<Fetched>({
      limit: limit.running,
      taken: limit.taken,
      orderKey,
      handle,
      isInterruption: (error) => error instanceof DeliveryInterrupted,
      commit: (positions) => this.fleet.commit(name, positions),
      commitIntervalMs: COMMIT_INTERVAL_MS,
      onCommitError: (error) => this.logger.warn('Offsets not committed yet; retrying', { consumer: name, error: describe(error) }),
      rewind: (topic, partition) => {
        // One rewind per partition at a time, to its lowest failed offset when it happens: two
        // seeks before one fetch would leave only the later one.
        const id = partitionId(topic, partition);
        if (rewinding.has(id)) return;
        rewinding.add(id);
        setTimeout(() => {
          rewinding.delete(id);
          const offset = dispatcher.firstFailed(topic, partition);
          if (offset === undefined || this.isStopping()) return;
          this.logger.warn('A message could not be handled; reading again from it', { consumer: name, topic, partition, offset });
          this.fleet.seek(name, topic, partition, offset);
        }, REWIND_DELAY_MS).unref();
      },
    });
    this.dispatchers.push(dispatcher);
    return {
      name,
      groupId: group,
      topics,
      isReplyConsumer: false,
      concurrency,
      autoCommit: false,
      onAssigned: (assignment) =>
        dispatcher.retain(new Set(Object.entries(assignment).flatMap(([topic, partitions]) => partitions.map((partition) => partitionId(topic, partition))))),
      eachBatch: async (payload) => {
        await this.ready;
        const { batch } = payload;
        await whileBeating(payload.heartbeat, KAFKA_CONSUMER_TIMEOUTS.heartbeatInterval, async () => {
          for (const message of batch.messages) {
            if (this.isStopping()) {
              // Nothing more is taken; paused so that it is not fetched again until the consumer leaves.
              payload.pause();
              return;
            }
            if (!payload.isRunning() || payload.isStale()) return;
            await dispatcher.take({ topic: batch.topic, partition: batch.partition, offset: message.offset, message });
            payload.resolveOffset(message.offset);
          }
        });
      },
    };
  }

  private async onRequest({ topic, partition, message }: Fetched, group: string, servedTopics: ReadonlyMap<string, ServedTopic>): Promise<void> {
    if (this.isStopping()) throw new DeliveryInterrupted(topic, partition, message.offset);
    this.recordDelivery(topic, group, message);
    const started = performance.now();
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
        const request: IncomingMessage = { ...incomingFromKafka(topic, partition, message, await this.codec.decode(message.value, headers), headers), attempt: 1 };
        reply = await answer(request, served?.handlers[request.type], this.logger, admission.scope);
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
    // Not awaited by the batch: a reply to a requester that has gone (its topic deleted) takes
    // the producer seconds to give up, and must not hold up the requests behind it. close()
    // still waits for it.
    void this.track(() => this.sendReply(replyTo, message.key, correlationId, reply, headers[TENANT_HEADER]));
  }

  private async onEvent({ topic, partition, message }: Fetched, group: string, subscribedTopics: ReadonlyMap<string, SubscribedTopic>): Promise<void> {
    if (this.isStopping()) throw new DeliveryInterrupted(topic, partition, message.offset);
    const subscription = subscribedTopics.get(topic);
    if (!subscription) throw new Error(`Group ${group} got a message of ${topic}, which it does not subscribe to`);
    this.recordDelivery(topic, group, message);
    const started = performance.now();
    const seconds = () => (performance.now() - started) / 1000;
    const headers = headersFromKafka(message.headers);
    // Refused for its tenant header before its body is read: the reason is the header, not the key.
    const admission = admit(headers, subscription.tenancy);
    if (!admission.admitted) {
      await this.deadLetter(topic, group, message, admission.refusal, 0);
      this.metrics.handled(topic, group, seconds(), 'refused');
      return;
    }
    if (isIgnored(subscription.handler, headers[Headers.messageType] ?? '')) {
      this.metrics.handled(topic, group, seconds(), 'ignored');
      return;
    }
    let event: Omit<IncomingMessage, 'attempt'>;
    try {
      event = incomingFromKafka(topic, partition, message, await this.codec.decode(message.value, headers), headers);
    } catch (error) {
      await this.deadLetter(topic, group, message, error, 1);
      this.metrics.handled(topic, group, seconds(), 'dead-lettered');
      return;
    }
    const delivery = await deliverWithRetries(event, subscription.handler, this.retry, () => this.isStopping(), undefined, subscription.tenancy, { topic, group, system: 'kafka' });
    if (delivery.outcome === 'interrupted') throw new DeliveryInterrupted(topic, partition, message.offset);
    if (delivery.outcome === 'failed') await this.deadLetter(topic, group, message, delivery.error, delivery.attempts);
    if (delivery.outcome === 'refused') await this.deadLetter(topic, group, message, delivery.error, 0);
    this.metrics.handled(topic, group, seconds(), delivery.outcome === 'failed' ? 'dead-lettered' : delivery.outcome === 'refused' ? 'refused' : 'ok');
  }

  /**
   * A reply carries its request's tenant, so it is sealed under (and bound to) the same tenant's
   * key. A requester's reply topic gets it through the plain producer; a durable topic (a
   * service resuming work from replies, e.g. mission steps) through the idempotent one.
   */
  private async sendReply(replyTo: string, key: Buffer | null, correlationId: string, reply: ReplyEnvelope, tenantId: string | undefined): Promise<void> {
    const headers = outgoingHeaders('reply', randomUUID(), {
      [Headers.correlationId]: correlationId,
      [Headers.replyStatus]: reply.ok ? 'ok' : 'error',
      ...(tenantId ? { [TENANT_HEADER]: tenantId } : {}),
    });
    try {
      const body = await this.codec.encode(reply, headers);
      const record: Message = { key, value: body.value, headers: { ...headers, ...body.headers } };
      if (isReplyTopic(replyTo)) {
        // Timed under one label for every requester's topic (one per gateway instance: as labels, a series per instance ever seen).
        await this.timedSend(REPLIES_LABEL, () =>
          withTimeout(
            this.replySender.send(replyTo, [record]),
            this.sendTimeoutMs,
            () => new Error(`Kafka did not acknowledge a reply to ${replyTo} within ${this.sendTimeoutMs} ms`),
          ),
        );
      } else {
        await this.send(replyTo, [record]);
      }
    } catch (error) {
      if (isUnknownTopicError(error)) this.logger.warn('Reply dropped: the requester has gone', { replyTo, correlationId });
      else this.logger.error('Reply could not be sent', { replyTo, correlationId, error: describe(error) });
    }
  }

  /** Parks a message that kept failing (or was refused: 0 attempts) in `<topic>.dlq`; if that fails too, the message is redelivered. */
  private async deadLetter(topic: string, group: string, message: KafkaMessage, error: unknown, attempts: number): Promise<void> {
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
    // The idempotent producer retries without end while the broker is away: bound the wait.
    return this.timedSend(topic, () =>
      withTimeout(this.sender.send(topic, messages), this.sendTimeoutMs, () => new Error(`Kafka did not acknowledge a send to ${topic} within ${this.sendTimeoutMs} ms`)),
    );
  }

  /** `sending`, its time until the broker acknowledged (or refused) it recorded under `label`. */
  private timedSend<T>(label: string, sending: () => Promise<T>): Promise<T> {
    const started = performance.now();
    return sending().then(
      (result) => {
        this.metrics.sent(label, (performance.now() - started) / 1000, true);
        return result;
      },
      (error: unknown) => {
        this.metrics.sent(label, (performance.now() - started) / 1000, false);
        throw error;
      },
    );
  }

  /**
   * How long after its producer sent it a record reached its handler. The timestamp is the
   * producer's clock (CreateTime), so across hosts this includes their clocks' difference; a
   * record dated in the future counts as 0.
   */
  private recordDelivery(topic: string, group: string, message: KafkaMessage, now: number = Date.now()): void {
    const sentAt = Number(message.timestamp);
    if (Number.isFinite(sentAt)) this.metrics.delivered(topic, group, Math.max(0, now - sentAt) / 1000);
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
      if (other.kind !== kind)
        throw new Error(`Group ${group} already ${other.kind === 'serve' ? 'serves' : 'subscribes to'} ${other.topic}: use separate groups to serve and to subscribe`);
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
