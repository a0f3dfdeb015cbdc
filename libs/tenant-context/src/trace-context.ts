import { AsyncLocalStorage } from 'node:async_hooks';
import { randomBytes } from 'node:crypto';

/** W3C Trace Context: the header that carries a trace across HTTP and the bus. */
export const TRACEPARENT_HEADER = 'traceparent';

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;
const ALL_ZERO = /^0+$/;

export interface TraceParent {
  readonly traceId: string;
  readonly parentId: string;
  readonly flags: string;
}

/** A version-00 traceparent, or undefined for anything else (including the all-zero ids the spec forbids). */
export function parseTraceparent(value: unknown): TraceParent | undefined {
  if (typeof value !== 'string') return undefined;
  const match = TRACEPARENT.exec(value.trim());
  if (!match) return undefined;
  const [, traceId = '', parentId = '', flags = ''] = match;
  if (ALL_ZERO.test(traceId) || ALL_ZERO.test(parentId)) return undefined;
  return { traceId, parentId, flags };
}

function format(traceId: string, flags: string): string {
  return `00-${traceId}-${randomBytes(8).toString('hex')}-${flags}`;
}

/** A new trace (sampled), for a request that arrived without one. */
export function newTraceparent(): string {
  return format(randomBytes(16).toString('hex'), '01');
}

/** The same trace with a new span id: what a hop (an HTTP request, a message) passes on. */
export function childTraceparent(parent: string | undefined): string {
  const parsed = parseTraceparent(parent);
  return parsed ? format(parsed.traceId, parsed.flags) : newTraceparent();
}

const storage = new AsyncLocalStorage<string>();

/** Runs `fn` in the trace `traceparent` (a valid one; otherwise a new trace is started). */
export function runWithTrace<T>(traceparent: string | undefined, fn: () => T): T {
  return storage.run(parseTraceparent(traceparent) ? (traceparent as string).trim() : newTraceparent(), fn);
}

export function currentTraceparent(): string | undefined {
  return storage.getStore();
}

/** The trace id of the current trace, for log lines. */
export function currentTraceId(): string | undefined {
  return parseTraceparent(storage.getStore())?.traceId;
}

/** The header that continues the current trace on an outgoing message; none outside a trace. */
export function traceHeaders(): Record<string, string> {
  const current = storage.getStore();
  return current ? { [TRACEPARENT_HEADER]: childTraceparent(current) } : {};
}
