import { randomUUID } from 'node:crypto';
import { DomainError, ErrorBody, ErrorCode, isErrorBody } from '@mission/contracts';
import { optionalTenant, runWithTenant, tenantFromHeaders, tenantHeaders } from '@mission/tenant-context';
import { Headers, IncomingMessage, RetryPolicy } from './bus';

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

/** Headers of a new outgoing message: ids, type and the current tenant. Explicit headers win. */
export function outgoingHeaders(type: string, id: string = randomUUID(), extra: Readonly<Record<string, string>> = {}): Record<string, string> {
  return {
    [Headers.messageId]: id,
    [Headers.messageType]: type,
    [Headers.correlationId]: extra[Headers.correlationId] ?? id,
    ...tenantHeaders(),
    ...extra,
  };
}

/** The default partition key of a request: its tenant, so one tenant's requests stay in order. */
export function defaultRequestKey(): string {
  return optionalTenant()?.tenantId ?? randomUUID();
}

/** Runs a handler inside the tenant context that the message's headers carry (if any). */
export function withMessageTenant<T>(message: Pick<IncomingMessage, 'headers'>, fn: () => Promise<T>): Promise<T> {
  const tenant = tenantFromHeaders(message.headers);
  return tenant ? runWithTenant(tenant, fn) : fn();
}

/** Invokes a request handler and turns its outcome into a reply, never throwing. */
export async function answer(
  message: IncomingMessage,
  handler: ((message: IncomingMessage) => Promise<unknown>) | undefined,
  logger: BusLogger,
): Promise<ReplyEnvelope> {
  if (!handler) {
    logger.error('No handler for request type', { topic: message.topic, type: message.type });
    return { ok: false, error: { code: ErrorCode.Internal, message: 'internal error' } };
  }
  try {
    const data = await withMessageTenant(message, () => handler(message));
    return { ok: true, data: data === undefined ? null : data };
  } catch (error) {
    if (error instanceof DomainError) return { ok: false, error: error.toBody() };
    logger.error('Request handler failed', { topic: message.topic, type: message.type, error: describe(error) });
    return { ok: false, error: { code: ErrorCode.Internal, message: 'internal error' } };
  }
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
  | { readonly outcome: 'failed'; readonly error: unknown; readonly attempts: number }
  /** The bus is stopping: leave the message for redelivery, neither handled nor dead-lettered. */
  | { readonly outcome: 'interrupted' };

/** Delivers an event with retries and backoff; says whether it was handled, failed for good, or interrupted. */
export async function deliverWithRetries(
  message: Omit<IncomingMessage, 'attempt'>,
  handler: (message: IncomingMessage) => Promise<void>,
  policy: RetryPolicy,
  isStopping: () => boolean,
  beforeRetry: () => Promise<void> = async () => undefined,
): Promise<DeliveryOutcome> {
  for (let attempt = 1; ; attempt++) {
    try {
      await withMessageTenant(message, () => handler({ ...message, attempt }));
      return { outcome: 'handled' };
    } catch (error) {
      if (attempt >= policy.attempts) return { outcome: 'failed', error, attempts: attempt };
      if (isStopping()) return { outcome: 'interrupted' };
      await new Promise((resolve) => setTimeout(resolve, backoffMs(policy, attempt)));
      if (isStopping()) return { outcome: 'interrupted' };
      await beforeRetry();
    }
  }
}

export function serialize(value: unknown): string {
  return JSON.stringify(value);
}

export function deserialize(raw: string | Buffer | null | undefined): unknown {
  if (raw === null || raw === undefined) return null;
  return JSON.parse(typeof raw === 'string' ? raw : raw.toString('utf8'));
}
