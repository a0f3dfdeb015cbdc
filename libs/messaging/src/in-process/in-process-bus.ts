import { randomUUID } from 'node:crypto';
import { DomainError, ErrorCode } from '@mission/contracts';
import { TENANT_HEADER } from '@mission/tenant-context';
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
  REPLY_TOPIC_PREFIX,
  REQUEST_DEADLINE_HEADER,
  requestExpired,
  unwrapReply,
} from '../delivery';
import { DEFAULT_MAX_IN_FLIGHT, InFlightLimit } from '../dispatch';
import { isImmutable, jsonOf } from '../immutable';
import { PayloadCodec, plainJsonCodec } from '../payload-codec';
import { PendingReplies } from '../replies';

/**
 * A message as it sits "on the wire": payload serialised, so no object the sender could still
 * change is ever shared. The exception is a payload that cannot change: an immutable one
 * (deep-frozen plain data, `immutable`) sent between buses whose codec is plain JSON as a request
 * (`requestMessage` marks every checked request so) or as a reply to a requester's own topic (a
 * cached final mission, say) is handed over as it is: the receiver skips decoding it, and its JSON
 * is made only if something reads the body (a dead letter). Events and replies to a durable topic
 * (which its subscribers take as events) are always decoded copies.
 */
interface WireMessage {
  readonly id: string;
  readonly topic: string;
  readonly type: string;
  readonly key: string;
  /** What the codec made of the payload, never the sender's object; of a shared payload, its JSON, made when first read. */
  readonly body: Buffer | string;
  /** The payload itself, when it is immutable, a request or a reply to a requester, and the codec is plain JSON (nothing to open or check). */
  readonly shared?: object;
  readonly headers: Readonly<Record<string, string>>;
}

interface Member {
  readonly bus: InProcessBus;
  /** Events keep their order per key; requests need none and run side by side. */
  readonly ordered: boolean;
  readonly deliver: (message: WireMessage) => Promise<void>;
}

function hashKey(key: string): number {
  let hash = 0;
  for (let i = 0; i < key.length; i++) hash = (Math.imul(hash, 31) + key.charCodeAt(i)) | 0;
  return Math.abs(hash);
}

/**
 * The in-process stand-in for a Kafka cluster: topics, consumer groups and per-key ordering of
 * events in one process (requests, like on Kafka, need no order and run side by side). Each group member gets a fixed share of keys, as Kafka assigns partitions.
 */
export class InProcessBroker {
  private readonly groups = new Map<string, Map<string, Member[]>>();
  private readonly chains = new Map<string, Promise<void>>();
  private readonly deadLettered: WireMessage[] = [];

  join(topic: string, group: string, member: Member): void {
    const groups = this.groups.get(topic) ?? new Map<string, Member[]>();
    this.groups.set(topic, groups);
    groups.set(group, [...(groups.get(group) ?? []), member]);
  }

  leave(bus: InProcessBus): void {
    for (const groups of this.groups.values()) {
      for (const [group, members] of groups) {
        const rest = members.filter((member) => member.bus !== bus);
        if (rest.length > 0) groups.set(group, rest);
        else groups.delete(group);
      }
    }
  }

  /** Hands the message to one member of every group subscribed to its topic, in key order. */
  produce(message: WireMessage): void {
    if (message.topic.endsWith('.dlq')) this.deadLettered.push(message);
    const groups = this.groups.get(message.topic);
    if (!groups) return;
    for (const [group, members] of groups) {
      const member = members[hashKey(message.key) % members.length];
      const deliver = (): Promise<void> =>
        member.deliver(message).catch((error: unknown) => {
          consoleBusLogger.error('In-process delivery failed', { topic: message.topic, group, error: describe(error) });
        });
      if (!member.ordered) {
        void deliver();
        continue;
      }
      const chainKey = `${message.topic}\u0000${group}\u0000${message.key}`;
      const previous = this.chains.get(chainKey) ?? Promise.resolve();
      const next = previous.then(deliver);
      this.chains.set(chainKey, next);
      void next.finally(() => {
        if (this.chains.get(chainKey) === next) this.chains.delete(chainKey);
      });
    }
  }

  /** Messages that ended in a dead-letter topic, for inspection. */
  deadLetters(topic?: string): readonly WireMessage[] {
    return topic ? this.deadLettered.filter((m) => m.topic === deadLetterTopic(topic)) : [...this.deadLettered];
  }
}

export interface InProcessBusOptions {
  readonly retry?: RetryPolicy;
  readonly requestTimeoutMs?: number;
  readonly logger?: BusLogger;
  /** Handling latencies and outcomes (none when absent; nothing is sent over a network here). */
  readonly metrics?: BusMetrics;
  /** How payloads become bodies (default plain JSON, as nothing leaves the process). */
  readonly codec?: PayloadCodec;
  /** Request handlers, and separately event handlers, running at once on this bus (default 64 each); more wait their turn. */
  readonly maxInFlight?: number;
}

/** One client of an InProcessBroker; behaves like one Kafka-connected process. */
export class InProcessBus implements MessageBus {
  private readonly registrations: Array<() => void> = [];
  private readonly inFlight = new Set<Promise<unknown>>();
  private readonly replyTopic = `${REPLY_TOPIC_PREFIX}in-process.${randomUUID()}`;
  private readonly retry: RetryPolicy;
  private readonly requestTimeoutMs: number;
  private readonly logger: BusLogger;
  private readonly metrics: BusMetrics;
  private readonly codec: PayloadCodec;
  /** Requests and events each have their own slots: an event handler awaiting a request never starves it. */
  private readonly limits: { readonly requests: InFlightLimit; readonly events: InFlightLimit };
  private readonly replies: PendingReplies;
  private state: 'new' | 'started' | 'stopping' | 'stopped' = 'new';

  constructor(
    private readonly broker: InProcessBroker,
    options: InProcessBusOptions = {},
  ) {
    this.retry = options.retry ?? DEFAULT_RETRY_POLICY;
    this.requestTimeoutMs = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    this.logger = options.logger ?? consoleBusLogger;
    this.metrics = options.metrics ?? NO_BUS_METRICS;
    this.codec = options.codec ?? plainJsonCodec;
    const maxInFlight = options.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT;
    this.limits = { requests: new InFlightLimit(maxInFlight), events: new InFlightLimit(maxInFlight) };
    this.replies = new PendingReplies(this.logger);
  }

  serve(topic: string, group: string, handlers: Readonly<Record<string, RequestHandler>>, options: HandlerOptions = {}): void {
    this.assertNotStarted();
    const tenancy = options.tenancy ?? 'tenant';
    this.registrations.push(() =>
      this.broker.join(topic, group, {
        bus: this,
        ordered: false,
        deliver: (wire) => this.track(() => this.limits.requests.run(() => this.onRequest(wire, topic, group, tenancy, handlers))),
      }),
    );
  }

  subscribe(topic: string, group: string, handler: EventHandler, options: HandlerOptions = {}): void {
    this.assertNotStarted();
    const tenancy = options.tenancy ?? 'tenant';
    // A broadcast group is this bus's alone: every bus gets every event.
    const ownGroup = options.broadcast ? `${group}.${randomUUID()}` : group;
    this.registrations.push(() =>
      this.broker.join(topic, ownGroup, {
        bus: this,
        ordered: true,
        deliver: (wire) => this.track(() => this.limits.events.run(() => this.onEvent(wire, topic, group, tenancy, handler))),
      }),
    );
  }

  async start(): Promise<void> {
    this.assertNotStarted();
    this.broker.join(this.replyTopic, this.replyTopic, {
      bus: this,
      ordered: false,
      deliver: (wire) => this.replies.deliver(wire.headers, () => this.payloadOf(wire)),
    });
    for (const register of this.registrations) register();
    this.state = 'started';
  }

  async request<R>(topic: string, type: string, payload: unknown, options: RequestOptions = {}): Promise<R> {
    this.assertRunning();
    const started = performance.now();
    let reply: unknown;
    try {
      const timeoutMs = options.timeoutMs ?? this.requestTimeoutMs;
      const id = randomUUID();
      const headers = outgoingHeaders(type, id, { [Headers.replyTo]: this.replyTopic, [REQUEST_DEADLINE_HEADER]: String(Date.now() + timeoutMs) });
      let wire: WireMessage;
      try {
        wire = await this.wire(topic, type, options.key ?? defaultRequestKey(), payload, headers, true);
      } catch (error) {
        this.logger.error('Request could not be sealed', { topic, type, id, error: describe(error) });
        throw new DomainError(ErrorCode.DependencyUnavailable, `Could not send ${type} to ${topic}`);
      }
      reply = await this.replies.wait(id, headers[TENANT_HEADER], timeoutMs, { topic, type }, async () => this.broker.produce(wire));
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
    const wires = await Promise.all(
      items.map(async ({ topic, message }) => {
        const id = message.id ?? randomUUID();
        try {
          return await this.wire(topic, message.type, message.key, message.payload, outgoingHeaders(message.type, id, message.headers));
        } catch (error) {
          this.logger.error('Event could not be sealed', { topic, type: message.type, id, error: describe(error) });
          throw new DomainError(ErrorCode.DependencyUnavailable, `Could not publish ${message.type} to ${topic}`);
        }
      }),
    );
    for (const wire of wires) this.broker.produce(wire);
  }

  async close(): Promise<void> {
    if (this.state === 'stopped') return;
    this.state = 'stopping';
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
    this.broker.leave(this);
    this.replies.rejectAll();
    this.state = 'stopped';
  }

  health(): BusHealth {
    return this.state === 'started' ? { up: true } : { up: false, detail: `in-process bus is ${this.state}` };
  }

  private async onRequest(wire: WireMessage, topic: string, group: string, tenancy: Tenancy, handlers: Readonly<Record<string, RequestHandler>>): Promise<void> {
    const started = performance.now();
    const replyTo = wire.headers[Headers.replyTo];
    const correlationId = wire.headers[Headers.correlationId];
    if (requestExpired(wire.headers)) {
      this.logger.warn('Request skipped: its requester stopped waiting', { topic, type: wire.type, id: wire.id });
      this.metrics.handled(topic, group, (performance.now() - started) / 1000, 'skipped');
      return;
    }
    const admission = admit(wire.headers, tenancy, { topic, group, system: 'in-process' });
    let reply: ReplyEnvelope;
    if (!admission.admitted) {
      this.deadLetter(wire, topic, group, admission.refusal, 0);
      reply = REFUSED_REPLY;
    } else {
      try {
        reply = await answer(await this.incoming(wire, 1), handlers[wire.type], this.logger, admission.scope);
      } catch (error) {
        this.logger.error('Unreadable request', { topic, id: wire.id, error: describe(error) });
        reply = { ok: false, error: { code: ErrorCode.Internal, message: 'internal error' } };
      }
    }
    this.metrics.handled(topic, group, (performance.now() - started) / 1000, !admission.admitted ? 'refused' : reply.ok ? 'ok' : 'error');
    if (!replyTo || !correlationId) {
      this.logger.warn('Request without reply-to or correlation-id: answer dropped', { topic, type: wire.type });
      return;
    }
    const tenantId = wire.headers[TENANT_HEADER];
    const headers = outgoingHeaders('reply', randomUUID(), {
      [Headers.correlationId]: correlationId,
      [Headers.replyStatus]: reply.ok ? 'ok' : 'error',
      ...(tenantId ? { [TENANT_HEADER]: tenantId } : {}),
    });
    try {
      this.broker.produce(await this.wire(replyTo, 'reply', wire.key, reply, headers, isReplyTopic(replyTo)));
    } catch (error) {
      this.logger.error('Reply could not be sent', { replyTo, correlationId, error: describe(error) });
    }
  }

  private async onEvent(wire: WireMessage, topic: string, group: string, tenancy: Tenancy, handler: EventHandler): Promise<void> {
    const started = performance.now();
    const seconds = () => (performance.now() - started) / 1000;
    const refusal = admit(wire.headers, tenancy);
    if (!refusal.admitted) {
      this.deadLetter(wire, topic, group, refusal.refusal, 0);
      this.metrics.handled(topic, group, seconds(), 'refused');
      return;
    }
    if (isIgnored(handler, wire.type)) {
      this.metrics.handled(topic, group, seconds(), 'ignored');
      return;
    }
    let message: Omit<IncomingMessage, 'attempt'>;
    try {
      const { attempt: _first, ...opened } = await this.incoming(wire, 1);
      message = opened;
    } catch (error) {
      this.deadLetter(wire, topic, group, error, 1);
      this.metrics.handled(topic, group, seconds(), 'dead-lettered');
      return;
    }
    const delivery = await deliverWithRetries(message, handler, this.retry, () => this.state !== 'started', undefined, tenancy, { topic, group, system: 'in-process' });
    if (delivery.outcome === 'failed') this.deadLetter(wire, topic, group, delivery.error, delivery.attempts);
    if (delivery.outcome === 'refused') this.deadLetter(wire, topic, group, delivery.error, 0);
    if (delivery.outcome !== 'interrupted') {
      const outcome = delivery.outcome === 'failed' ? 'dead-lettered' : delivery.outcome === 'refused' ? 'refused' : 'ok';
      this.metrics.handled(topic, group, seconds(), outcome);
    }
  }

  /** Parks a message in `<topic>.dlq` with why and after how many deliveries (0: refused unhandled). */
  private deadLetter(wire: WireMessage, topic: string, group: string, error: unknown, attempts: number): void {
    this.logger.error('Message dead-lettered', { topic, group, type: wire.type, id: wire.id, attempts, error: describe(error) });
    const { shared: _kept, ...parked } = wire;
    this.broker.produce({
      ...parked,
      topic: deadLetterTopic(topic),
      headers: { ...wire.headers, [Headers.error]: describe(error), [Headers.attempts]: String(attempts) },
    });
  }

  /** `shareable`: a request, or a reply to a requester's own topic, which is shared when immutable (see WireMessage). */
  private async wire(topic: string, type: string, key: string, payload: unknown, headers: Record<string, string>, shareable = false): Promise<WireMessage> {
    const id = headers[Headers.messageId] ?? randomUUID();
    // A sealing codec, if configured, must see and seal every payload: only plain JSON is skipped.
    if (shareable && this.codec === plainJsonCodec && isImmutable(payload)) {
      const shared = payload as object;
      return {
        id,
        topic,
        type,
        key,
        shared,
        headers: { ...headers },
        get body(): string {
          return jsonOf(shared);
        },
      };
    }
    const body = await this.codec.encode(payload, headers);
    return { id, topic, type, key, body: body.value, headers: { ...headers, ...body.headers } };
  }

  /** A shared reply is taken as it is only by a bus that reads plain JSON too; anything else opens the body. */
  private async payloadOf(wire: WireMessage): Promise<unknown> {
    return wire.shared !== undefined && this.codec === plainJsonCodec ? wire.shared : this.codec.decode(wire.body, wire.headers);
  }

  private async incoming(wire: WireMessage, attempt: number): Promise<IncomingMessage> {
    const payload = await this.payloadOf(wire);
    return { id: wire.id, topic: wire.topic, type: wire.type, key: wire.key, payload, headers: { ...wire.headers }, attempt };
  }

  private track(work: () => Promise<void>): Promise<void> {
    const promise = Promise.resolve().then(work);
    this.inFlight.add(promise);
    return promise.finally(() => this.inFlight.delete(promise));
  }

  private assertNotStarted(): void {
    if (this.state !== 'new') throw new Error('Register handlers and start the bus only once, before it runs');
  }

  private assertRunning(): void {
    if (this.state !== 'started') throw new DomainError(ErrorCode.DependencyUnavailable, 'The message bus is not running');
  }
}
