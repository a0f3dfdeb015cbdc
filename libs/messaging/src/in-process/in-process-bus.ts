import { randomUUID } from 'node:crypto';
import { DomainError, ErrorCode } from '@mission/contracts';
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
} from '../bus';
import {
  admit,
  answer,
  BusLogger,
  consoleBusLogger,
  defaultRequestKey,
  deliverWithRetries,
  describe,
  deserialize,
  outgoingHeaders,
  REFUSED_REPLY,
  ReplyEnvelope,
  requestTimedOut,
  serialize,
  unwrapReply,
} from '../delivery';

/** A message as it sits "on the wire": payload serialised, so no object is ever shared. */
interface WireMessage {
  readonly id: string;
  readonly topic: string;
  readonly type: string;
  readonly key: string;
  readonly body: string;
  readonly headers: Readonly<Record<string, string>>;
}

interface Member {
  readonly bus: InProcessBus;
  readonly deliver: (message: WireMessage) => Promise<void>;
}

function hashKey(key: string): number {
  let hash = 0;
  for (let i = 0; i < key.length; i++) hash = (Math.imul(hash, 31) + key.charCodeAt(i)) | 0;
  return Math.abs(hash);
}

/**
 * The in-process stand-in for a Kafka cluster: topics, consumer groups and per-key ordering in
 * one process. Each group member gets a fixed share of keys, as Kafka assigns partitions.
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
      const chainKey = `${message.topic}\u0000${group}\u0000${message.key}`;
      const previous = this.chains.get(chainKey) ?? Promise.resolve();
      const next = previous.then(() => member.deliver(message)).catch((error: unknown) => {
        consoleBusLogger.error('In-process delivery failed', { topic: message.topic, group, error: describe(error) });
      });
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
}

interface PendingRequest {
  readonly resolve: (reply: unknown) => void;
  readonly reject: (error: unknown) => void;
  readonly timer: NodeJS.Timeout;
}

/** One client of an InProcessBroker; behaves like one Kafka-connected process. */
export class InProcessBus implements MessageBus {
  private readonly registrations: Array<() => void> = [];
  private readonly pending = new Map<string, PendingRequest>();
  private readonly inFlight = new Set<Promise<unknown>>();
  private readonly replyTopic = `replies.in-process.${randomUUID()}`;
  private readonly retry: RetryPolicy;
  private readonly requestTimeoutMs: number;
  private readonly logger: BusLogger;
  private readonly metrics: BusMetrics;
  private state: 'new' | 'started' | 'stopping' | 'stopped' = 'new';

  constructor(
    private readonly broker: InProcessBroker,
    options: InProcessBusOptions = {},
  ) {
    this.retry = options.retry ?? DEFAULT_RETRY_POLICY;
    this.requestTimeoutMs = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    this.logger = options.logger ?? consoleBusLogger;
    this.metrics = options.metrics ?? NO_BUS_METRICS;
  }

  serve(topic: string, group: string, handlers: Readonly<Record<string, RequestHandler>>, options: HandlerOptions = {}): void {
    this.assertNotStarted();
    const tenancy = options.tenancy ?? 'tenant';
    this.registrations.push(() =>
      this.broker.join(topic, group, {
        bus: this,
        deliver: (wire) =>
          this.track(async () => {
            const started = performance.now();
            const replyTo = wire.headers[Headers.replyTo];
            const admission = admit(wire.headers, tenancy, { topic, group, system: 'in-process' });
            let reply: ReplyEnvelope;
            if (admission.admitted) {
              reply = await answer(this.incoming(wire, 1), handlers[wire.type], this.logger, admission.scope);
            } else {
              this.deadLetter(wire, topic, group, admission.refusal, 0);
              reply = REFUSED_REPLY;
            }
            this.metrics.handled(topic, group, (performance.now() - started) / 1000, !admission.admitted ? 'refused' : reply.ok ? 'ok' : 'error');
            if (replyTo) this.broker.produce(this.wire(replyTo, 'reply', wire.key, reply, { [Headers.correlationId]: wire.headers[Headers.correlationId] }));
          }),
      }),
    );
  }

  subscribe(topic: string, group: string, handler: EventHandler, options: HandlerOptions = {}): void {
    this.assertNotStarted();
    const tenancy = options.tenancy ?? 'tenant';
    this.registrations.push(() =>
      this.broker.join(topic, group, {
        bus: this,
        deliver: (wire) =>
          this.track(async () => {
            const started = performance.now();
            const { attempt: _first, ...message } = this.incoming(wire, 1);
            const delivery = await deliverWithRetries(message, handler, this.retry, () => this.state !== 'started', undefined, tenancy, { topic, group, system: 'in-process' });
            if (delivery.outcome === 'failed') this.deadLetter(wire, topic, group, delivery.error, delivery.attempts);
            if (delivery.outcome === 'refused') this.deadLetter(wire, topic, group, delivery.error, 0);
            if (delivery.outcome !== 'interrupted') {
              const outcome = delivery.outcome === 'failed' ? 'dead-lettered' : delivery.outcome === 'refused' ? 'refused' : 'ok';
              this.metrics.handled(topic, group, (performance.now() - started) / 1000, outcome);
            }
          }),
      }),
    );
  }

  /** Parks a message in `<topic>.dlq` with why and after how many deliveries (0: refused unhandled). */
  private deadLetter(wire: WireMessage, topic: string, group: string, error: unknown, attempts: number): void {
    this.logger.error('Message dead-lettered', { topic, group, type: wire.type, id: wire.id, attempts, error: describe(error) });
    this.broker.produce({
      ...wire,
      topic: deadLetterTopic(topic),
      headers: { ...wire.headers, [Headers.error]: describe(error), [Headers.attempts]: String(attempts) },
    });
  }

  async start(): Promise<void> {
    this.assertNotStarted();
    this.broker.join(this.replyTopic, this.replyTopic, {
      bus: this,
      deliver: async (wire) => {
        const pending = this.pending.get(wire.headers[Headers.correlationId] ?? '');
        if (pending) pending.resolve(deserialize(wire.body));
      },
    });
    for (const register of this.registrations) register();
    this.state = 'started';
  }

  async request<R>(topic: string, type: string, payload: unknown, options: RequestOptions = {}): Promise<R> {
    this.assertRunning();
    const timeoutMs = options.timeoutMs ?? this.requestTimeoutMs;
    const id = randomUUID();
    const reply = await new Promise<unknown>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(requestTimedOut(topic, type, timeoutMs));
      }, timeoutMs);
      this.pending.set(id, {
        timer,
        resolve: (value) => {
          clearTimeout(timer);
          this.pending.delete(id);
          resolve(value);
        },
        reject,
      });
      this.broker.produce(this.wire(topic, type, options.key ?? defaultRequestKey(), payload, outgoingHeaders(type, id, { [Headers.replyTo]: this.replyTopic })));
    });
    return unwrapReply<R>(reply);
  }

  async publish(topic: string, message: OutgoingMessage): Promise<void> {
    this.assertRunning();
    const id = message.id ?? randomUUID();
    this.broker.produce(this.wire(topic, message.type, message.key, message.payload, outgoingHeaders(message.type, id, message.headers)));
  }

  async close(): Promise<void> {
    if (this.state === 'stopped') return;
    this.state = 'stopping';
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
    this.broker.leave(this);
    for (const pending of this.pending.values()) {
      clearTimeout(pending.timer);
      pending.reject(new DomainError(ErrorCode.DependencyUnavailable, 'The message bus closed before the reply arrived'));
    }
    this.pending.clear();
    this.state = 'stopped';
  }

  health(): BusHealth {
    return this.state === 'started' ? { up: true } : { up: false, detail: `in-process bus is ${this.state}` };
  }

  private wire(topic: string, type: string, key: string, payload: unknown, headers: Record<string, string>): WireMessage {
    return { id: headers[Headers.messageId] ?? randomUUID(), topic, type, key, body: serialize(payload), headers };
  }

  private incoming(wire: WireMessage, attempt: number): IncomingMessage {
    return { id: wire.id, topic: wire.topic, type: wire.type, key: wire.key, payload: deserialize(wire.body), headers: { ...wire.headers }, attempt };
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
