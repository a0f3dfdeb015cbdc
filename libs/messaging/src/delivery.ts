import { randomUUID } from 'node:crypto';
import { DomainError, ErrorBody, ErrorCode, isErrorBody } from '@mission/contracts';
import { isTenantId, runWithTrace, tenantScope, TENANT_HEADER, tenantHeaders, traceHeaders, type TraceSpan } from '@mission/tenant-context';
import { EventHandler, Headers, IncomingMessage, RetryPolicy, Tenancy } from './bus';
import { immutableWrapper, jsonOf } from './immutable';
import { isDependencyUnavailable } from './unavailable';

/** What a reply carries: the handler's result or an error body. */
export type ReplyEnvelope = { readonly ok: true; readonly data: unknown } | { readonly ok: false; readonly error: ErrorBody };

export interface BusLogger {
  warn(message: string, context?: Record<string, unknown>): void;
  error(message: string, context?: Record<string, unknown>): void;
}

export const consoleBusLogger: BusLogger = {
  warn: (message, context) => console.warn(JSON.stringify({ level: 'warn', msg: message, ...context })),
  error: (message, context) => console.error(JSON.stringify({ level: 'error', msg: message, ...context })),
};

/** Headers of a new outgoing message: ids, type, the current tenant and trace. Explicit headers win. */
export function outgoingHeaders(type: string, id: string = randomUUID(), extra: Readonly<Record<string, string>> = {}): Record<string, string> {
  return {
    [Headers.messageId]: id,
    [Headers.messageType]: type,
    [Headers.correlationId]: extra[Headers.correlationId] ?? id,
    ...tenantHeaders(),
    ...traceHeaders(),
    ...extra,
  };
}

/**
 * When the requester stops waiting (epoch ms). A server skips a request whose requester has
 * already given up, e.g. a backlog read by a new group from the beginning.
 */
export const REQUEST_DEADLINE_HEADER = 'request-deadline';

/** True when the request carries a deadline that has passed: nobody waits for its answer any more. */
export function requestExpired(headers: Readonly<Record<string, string>>, now: number = Date.now()): boolean {
  const raw = headers[REQUEST_DEADLINE_HEADER];
  if (raw === undefined) return false;
  const deadline = Number(raw);
  return Number.isFinite(deadline) && deadline < now;
}

/** The prefix of a requester's own reply topic (`replies.<client>.<instance>`); other reply-to topics are durable. */
export const REPLY_TOPIC_PREFIX = 'replies.';

/** Whether `topic` is a requester's reply topic, which goes away with its requester. */
export function isReplyTopic(topic: string): boolean {
  return topic.startsWith(REPLY_TOPIC_PREFIX);
}

/**
 * The default partition key of a request: a fresh one. A caller awaits its reply, so requests
 * need no order among themselves; keying them by tenant would queue all of one tenant's requests
 * behind each other on one partition. Callers that do need order pass their own key.
 */
export function defaultRequestKey(): string {
  return randomUUID();
}

/** Why a message was not handed to a tenant handler; its text goes into the dead letter's `error` header. */
export class TenantRefusedError extends Error {
  constructor(reason: string) {
    super(reason);
    this.name = 'TenantRefused';
  }
}

/**
 * Thrown by an event handler for a message it can never handle, whatever the attempt (a payload
 * that does not match its schema): the bus dead-letters it at once instead of retrying it.
 */
export class PoisonMessageError extends Error {
  constructor(reason: string) {
    super(reason);
    this.name = 'PoisonMessage';
  }
}

/** Runs a handler in the context a message may act in: its tenant (or none, for operator handlers) and its trace. */
export type MessageScope = <T>(fn: () => Promise<T>) => Promise<T>;

/** Where a message is consumed: names the span its processing runs in when tracing is on. */
export interface ConsumerSite {
  readonly topic: string;
  readonly group: string;
  /** `messaging.system` of the span: `kafka`, or `in-process` for the embedded bus. */
  readonly system: string;
}

/** The span of one processing of a message (OpenTelemetry messaging conventions; ids, never payloads). */
export function processSpan(site: ConsumerSite, headers: Readonly<Record<string, string>>): TraceSpan {
  const attributes: Record<string, string> = {
    'messaging.system': site.system,
    'messaging.operation.type': 'process',
    'messaging.destination.name': site.topic,
    'messaging.consumer.group.name': site.group,
  };
  const id = headers[Headers.messageId];
  const type = headers[Headers.messageType];
  if (id) attributes['messaging.message.id'] = id;
  if (type) attributes['mission.message.type'] = type;
  return { name: `process ${site.topic}`, kind: 'consumer', attributes };
}

export type Admission = { readonly admitted: true; readonly scope: MessageScope } | { readonly admitted: false; readonly refusal: TenantRefusedError };

/**
 * Decides whether a message may reach a handler of the given tenancy, and in which context. A
 * tenant handler needs a valid `tenant-id` header; missing or malformed is refused, never run as
 * "no tenant". An operator handler runs outside any tenant context, whoever sent the message.
 */
export function admit(headers: Readonly<Record<string, string>>, tenancy: Tenancy, site?: ConsumerSite): Admission {
  const trace = headers[Headers.traceparent];
  const span = site ? processSpan(site, headers) : undefined;
  if (tenancy === 'operator') return { admitted: true, scope: (fn) => runWithTrace(trace, fn, span, { tenant: undefined }) };
  const tenantId = headers[TENANT_HEADER];
  if (tenantId === undefined) return { admitted: false, refusal: new TenantRefusedError(`a tenant handler got a message without a ${TENANT_HEADER} header`) };
  if (!isTenantId(tenantId)) return { admitted: false, refusal: new TenantRefusedError(`a tenant handler got a message with an invalid ${TENANT_HEADER} header`) };
  const tenant = tenantScope({ tenantId: tenantId.toLowerCase() });
  return { admitted: true, scope: (fn) => runWithTrace(trace, fn, span, tenant) };
}

/** What a refused request is answered with: the caller sent it outside a tenant, which is a bug on its side. */
export const REFUSED_REPLY: ReplyEnvelope = { ok: false, error: { code: ErrorCode.Internal, message: 'internal error' } };

/** The success reply around each immutable result (a cached final mission): one envelope, encoded once. */
const SUCCESS_REPLIES = new WeakMap<object, ReplyEnvelope>();

/** Invokes a request handler and turns its outcome into a reply, never throwing. */
export async function answer(
  message: IncomingMessage,
  handler: ((message: IncomingMessage) => Promise<unknown>) | undefined,
  logger: BusLogger,
  scope: MessageScope,
): Promise<ReplyEnvelope> {
  if (!handler) {
    logger.error('No handler for request type', { topic: message.topic, type: message.type });
    return { ok: false, error: { code: ErrorCode.Internal, message: 'internal error' } };
  }
  try {
    const data = await scope(() => handler(message));
    return immutableWrapper(SUCCESS_REPLIES, data, () => ({ ok: true, data: data === undefined ? null : data }));
  } catch (error) {
    if (error instanceof DomainError) return { ok: false, error: error.toBody() };
    if (isDependencyUnavailable(error)) {
      logger.warn('Request handler could not reach a dependency', { topic: message.topic, type: message.type, error: describe(error) });
      return { ok: false, error: { code: ErrorCode.DependencyUnavailable, message: 'A service this request needs is temporarily unavailable' } };
    }
    logger.error('Request handler failed', { topic: message.topic, type: message.type, error: describe(error) });
    return { ok: false, error: { code: ErrorCode.Internal, message: 'internal error' } };
  }
}

/** Whether `handler` says it reacts to no event of type `type` (`eventTypes`): passed by unread. */
export function isIgnored(handler: EventHandler, type: string): boolean {
  return handler.eventTypes !== undefined && !handler.eventTypes.has(type);
}

/** Turns a reply back into the handler's result, or rethrows its DomainError. */
export function unwrapReply<R>(reply: unknown): R {
  if (typeof reply === 'object' && reply !== null && 'ok' in reply) {
    const envelope = reply as ReplyEnvelope;
    if (envelope.ok) return envelope.data as R;
    if (isErrorBody(envelope.error)) throw DomainError.fromBody(envelope.error);
  }
  throw new DomainError(ErrorCode.Internal, 'internal error');
}

export function requestTimedOut(topic: string, type: string, timeoutMs: number): DomainError {
  return new DomainError(ErrorCode.DependencyUnavailable, `No answer to ${type} on ${topic} within ${timeoutMs} ms`);
}

export function backoffMs(policy: RetryPolicy, attempt: number): number {
  return Math.min(policy.maxBackoffMs, policy.initialBackoffMs * 2 ** Math.max(0, attempt - 1));
}

export function describe(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}

export type DeliveryOutcome =
  | { readonly outcome: 'handled' }
  /** Not admitted (no valid tenant for a tenant handler): dead-letter it at once, retrying cannot help. */
  | { readonly outcome: 'refused'; readonly error: TenantRefusedError }
  /** Failed on its last attempt, or threw a PoisonMessageError (retrying cannot help): dead-letter it. */
  | { readonly outcome: 'failed'; readonly error: unknown; readonly attempts: number }
  /** The bus is stopping: leave the message for redelivery, neither handled nor dead-lettered. */
  | { readonly outcome: 'interrupted' };

/** Delivers an event with retries and backoff (none after a PoisonMessageError); says whether it was handled, refused, failed for good, or interrupted. */
export async function deliverWithRetries(
  message: Omit<IncomingMessage, 'attempt'>,
  handler: (message: IncomingMessage) => Promise<void>,
  policy: RetryPolicy,
  isStopping: () => boolean,
  beforeRetry: () => Promise<void> = async () => undefined,
  tenancy: Tenancy = 'tenant',
  site?: ConsumerSite,
): Promise<DeliveryOutcome> {
  const admission = admit(message.headers, tenancy, site);
  if (!admission.admitted) return { outcome: 'refused', error: admission.refusal };
  for (let attempt = 1; ; attempt++) {
    try {
      await admission.scope(() => handler({ ...message, attempt }));
      return { outcome: 'handled' };
    } catch (error) {
      if (attempt >= policy.attempts || error instanceof PoisonMessageError) return { outcome: 'failed', error, attempts: attempt };
      if (isStopping()) return { outcome: 'interrupted' };
      await new Promise((resolve) => setTimeout(resolve, backoffMs(policy, attempt)));
      if (isStopping()) return { outcome: 'interrupted' };
      await beforeRetry();
    }
  }
}

export function serialize(value: unknown): string {
  return jsonOf(value);
}

export function deserialize(raw: string | Buffer | null | undefined): unknown {
  if (raw === null || raw === undefined) return null;
  return JSON.parse(typeof raw === 'string' ? raw : raw.toString('utf8'));
}
