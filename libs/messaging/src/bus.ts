/**
 * The bus port: request/reply and publish/subscribe. Two adapters implement it with the same
 * semantics (Kafka and in-process); `testing/bus-contract.ts` is the suite both must pass.
 *
 * Semantics every adapter keeps:
 * - Payloads cross the bus as JSON: a handler never sees the sender's objects. (One exception,
 *   on the in-process bus with plain JSON: a reply to a requester that is immutable, deep-frozen
 *   plain data nobody can change, such as a cached final mission, reaches the requester as it is.)
 * - The current tenant (tenant-context) travels in the `tenant-id` header, the current trace in
 *   `traceparent` (W3C).
 * - Tenancy is declared per registration (HandlerOptions): a tenant handler (the default) runs
 *   in the tenant its message carries, and a message without a valid tenant is refused — a
 *   request is answered with `internal_error`, and requests and events alike go to `<topic>.dlq`
 *   with the reason; the handler never sees it. An operator handler serves platform-level
 *   messages (the identity provider's) and always runs outside any tenant context.
 * - Requests: one handler of the serving group answers, requests concurrently (bounded per
 *   process); the reply goes to the request's `reply-to` topic: the requester's own, or a durable
 *   topic whose subscribers take it as an event (a reply of type `reply`, keyed as the request).
 *   A request carries its deadline; a server skips a request whose requester stopped waiting.
 *   A DomainError thrown by the handler is rethrown to the caller with its code; any other
 *   failure becomes `internal_error` without details. A request unanswered within its timeout
 *   fails with `dependency_unavailable`; a reply naming another tenant than its request is
 *   refused (`internal_error`).
 * - Events: each subscribed group gets every message at least once, in order per key (keys
 *   concurrently, bounded per process). A failing handler is retried with backoff; after the
 *   last attempt the message goes to `<topic>.dlq`. A handler that throws a PoisonMessageError
 *   (a message it can never handle, e.g. a payload that fails its schema) is not retried: the
 *   message goes to `<topic>.dlq` at once, with the reason. A handler that names its event types
 *   (`eventTypes`, as `eventHandlers` does) is never handed another type: such an event is passed
 *   by after its tenant check, its body unread (so neither opened nor dead-lettered if it would
 *   not open), and counted `ignored`.
 * - Bodies pass through the bus's PayloadCodec (plain JSON, or sealed per tenant).
 */
export const Headers = {
  messageId: 'message-id',
  messageType: 'message-type',
  correlationId: 'correlation-id',
  replyTo: 'reply-to',
  replyStatus: 'reply-status',
  attempts: 'attempts',
  error: 'error',
  traceparent: 'traceparent',
} as const;

export interface OutgoingMessage<T = unknown> {
  readonly type: string;
  /** Partition key, `tenantId:aggregateId` for tenant data, so one aggregate stays ordered. */
  readonly key: string;
  readonly payload: T;
  /** Stable id for idempotent consumers; generated when absent (the outbox supplies its row id). */
  readonly id?: string;
  readonly headers?: Readonly<Record<string, string>>;
}

export interface IncomingMessage<T = unknown> {
  readonly id: string;
  readonly topic: string;
  readonly type: string;
  readonly key: string;
  readonly payload: T;
  readonly headers: Readonly<Record<string, string>>;
  /** 1 on first delivery, higher on retries. */
  readonly attempt: number;
}

export type RequestHandler = (message: IncomingMessage) => Promise<unknown>;

/** Whom the handlers of a registration act for. */
export type Tenancy = 'tenant' | 'operator';

export interface HandlerOptions {
  /**
   * `tenant` (the default, so a forgotten declaration fails closed): every message must carry a
   * valid `tenant-id` header. `operator`: platform messages, handled outside any tenant context
   * (a tenant header, if present, is not restored).
   */
  readonly tenancy?: Tenancy;
  /**
   * Events only: every instance gets every event, from the time it starts (nothing published
   * before is replayed), in a group of its own named `<group>.<instance id>` and removed when it
   * closes. For what each replica keeps in memory (the gateway's open event streams), never for
   * work that must happen once.
   */
  readonly broadcast?: boolean;
}
export type EventHandler = ((message: IncomingMessage) => Promise<void>) & {
  /**
   * The event types the handler reacts to, when it says (`eventHandlers` does): the bus passes
   * others by unread, after the tenant check and before the payload is opened, and counts them
   * `ignored`. Absent: every event reaches the handler.
   */
  readonly eventTypes?: ReadonlySet<string>;
};

export interface RequestOptions {
  readonly timeoutMs?: number;
  /** Partition key; defaults to a fresh one, as requests need no order among themselves. */
  readonly key?: string;
}

export interface RetryPolicy {
  /** Deliveries before a message is dead-lettered (including the first). */
  readonly attempts: number;
  readonly initialBackoffMs: number;
  readonly maxBackoffMs: number;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = { attempts: 5, initialBackoffMs: 200, maxBackoffMs: 5_000 };
export const DEFAULT_REQUEST_TIMEOUT_MS = 10_000;

/**
 * Where a bus reports what it does, for metrics. Labels are bounded: topics, groups and
 * partitions are fixed by the platform, never tenants or message ids.
 */
export interface BusMetrics {
  /** A send to `topic` settled (its records acknowledged, or failed) after `seconds`. */
  sent(topic: string, seconds: number, ok: boolean): void;
  /**
   * A request to `topic` settled after `seconds`, from the requester's side: from its sealing to
   * its reply's arrival (`answered`: a reply came and was read, a success or an error), or to its
   * failure (not sent, timed out, an unreadable reply).
   */
  requested(topic: string, seconds: number, answered: boolean): void;
  /**
   * A delivered message was handled: answered or processed (`ok`, `error`), dead-lettered,
   * refused (no valid tenant), `skipped` (a request its requester stopped waiting for) or
   * `ignored` (an event of a type its handler does not name).
   */
  handled(topic: string, group: string, seconds: number, outcome: 'ok' | 'error' | 'dead-lettered' | 'refused' | 'skipped' | 'ignored'): void;
  /**
   * A delivered message reached its handler `seconds` after its producer sent it (the record's
   * timestamp; Kafka only): the time it spent in the broker, in the consumer's fetch and waiting
   * for a handler slot. Replies to a requester count under the topic and group `replies`.
   */
  delivered(topic: string, group: string, seconds: number): void;
  /** Records of a partition not yet consumed by `group` (Kafka only). */
  lag(topic: string, group: string, partition: number, records: number): void;
  /** `group` was (re)assigned its partitions: the lag of partitions it may have lost is stale. */
  assigned(group: string): void;
}

export const NO_BUS_METRICS: BusMetrics = {
  sent: () => undefined,
  requested: () => undefined,
  handled: () => undefined,
  delivered: () => undefined,
  lag: () => undefined,
  assigned: () => undefined,
};

export interface BusHealth {
  readonly up: boolean;
  readonly detail?: string;
}

export interface MessageBus {
  /** Answers requests of `topic` as part of consumer `group`. Register before start(). */
  serve(topic: string, group: string, handlers: Readonly<Record<string, RequestHandler>>, options?: HandlerOptions): void;
  /** Delivers every event of `topic` to `handler` (of the types it names, if it names them: `eventTypes`), once per `group`. Register before start(). */
  subscribe(topic: string, group: string, handler: EventHandler, options?: HandlerOptions): void;
  start(): Promise<void>;
  request<R>(topic: string, type: string, payload: unknown, options?: RequestOptions): Promise<R>;
  publish(topic: string, message: OutgoingMessage): Promise<void>;
  /** Publishes several messages together, in order (one aggregate's events keep theirs); fails if any fails. */
  publishAll(items: ReadonlyArray<{ readonly topic: string; readonly message: OutgoingMessage }>): Promise<void>;
  /** Stops taking new messages and waits for those in flight. */
  close(): Promise<void>;
  health(): BusHealth;
}

export function deadLetterTopic(topic: string): string {
  return `${topic}.dlq`;
}
