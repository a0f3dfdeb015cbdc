import { randomFillSync } from 'node:crypto';
import { currentScope, runInScope, type Scope } from './scope';
import { context as otelContext, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Context, type SpanContext } from '@opentelemetry/api';

/** W3C Trace Context: the header that carries a trace across HTTP and the bus. */
export const TRACEPARENT_HEADER = 'traceparent';

/**
 * Random hex for trace and span ids, cut from a pool filled 4 KiB at a time: ids are made several
 * times per request, and one system call each was a visible share of the gateway's work. Crypto
 * randomness all the same (ids must not collide across processes), as Node's randomUUID does.
 */
const ID_POOL = Buffer.alloc(4096);
let idPoolOffset = ID_POOL.length;

function randomHex(bytes: number): string {
  if (idPoolOffset + bytes > ID_POOL.length) {
    randomFillSync(ID_POOL);
    idPoolOffset = 0;
  }
  const hex = ID_POOL.toString('hex', idPoolOffset, idPoolOffset + bytes);
  idPoolOffset += bytes;
  return hex;
}

const TRACEPARENT = /^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/;
const ZERO_TRACE_ID = '0'.repeat(32);
const ZERO_PARENT_ID = '0'.repeat(16);

export interface TraceParent {
  readonly traceId: string;
  readonly parentId: string;
  readonly flags: string;
}

/** A version-00 traceparent, or undefined for anything else (including the all-zero ids the spec forbids). */
export function parseTraceparent(value: unknown): TraceParent | undefined {
  if (typeof value !== 'string') return undefined;
  // Parsed several times per request: one test, then cuts at the fixed offsets of version 00.
  const header = value.trim();
  if (!TRACEPARENT.test(header)) return undefined;
  const traceId = header.slice(3, 35);
  const parentId = header.slice(36, 52);
  if (traceId === ZERO_TRACE_ID || parentId === ZERO_PARENT_ID) return undefined;
  return { traceId, parentId, flags: header.slice(53, 55) };
}

function format(traceId: string, flags: string): string {
  return `00-${traceId}-${randomHex(8)}-${flags}`;
}

/** A new trace (sampled), for a request that arrived without one. */
export function newTraceparent(): string {
  return format(randomHex(16), '01');
}

/** The same trace with a new span id: what a hop (an HTTP request, a message) passes on. */
export function childTraceparent(parent: string | undefined): string {
  const parsed = parseTraceparent(parent);
  return parsed ? format(parsed.traceId, parsed.flags) : newTraceparent();
}

/** What a trace may be entered together with, in the same scope (one scope entered instead of several). */
export type AlongsideTrace = Omit<Scope, 'traceparent'>;

/** Runs `fn` with `traceparent` as the current trace (and `alongside`'s parts, if any). */
function inTrace<T>(traceparent: string, fn: () => T, alongside?: AlongsideTrace): T {
  return runInScope(alongside ? { ...alongside, traceparent } : { traceparent }, fn);
}

/**
 * Whether OpenTelemetry is recording (the telemetry library turns this on when it starts an SDK).
 * Off, traces are still carried (ids in headers and logs) but no spans are made; on, every hop is
 * a real span and the ids carried are the spans' own.
 */
let spansOn = false;
const TRACER = 'mission-service';

export function useOpenTelemetrySpans(on: boolean): void {
  spansOn = on;
}

function formatSpanContext(spanContext: SpanContext): string {
  return `00-${spanContext.traceId}-${spanContext.spanId}-${(spanContext.traceFlags & 0xff).toString(16).padStart(2, '0')}`;
}

/** The traceparent of the active OpenTelemetry span (e.g. the HTTP server span), if spans are on. */
export function activeSpanTraceparent(): string | undefined {
  if (!spansOn) return undefined;
  const spanContext = trace.getSpanContext(otelContext.active());
  return spanContext && trace.isSpanContextValid(spanContext) ? formatSpanContext(spanContext) : undefined;
}

/** Names the active span (e.g. the HTTP server span after routing: `GET /api/missions/:id`); nothing when spans are off. */
export function describeActiveSpan(name: string, attributes: Attributes = {}): void {
  if (!spansOn) return;
  const span = trace.getActiveSpan();
  if (!span) return;
  span.updateName(name);
  span.setAttributes(attributes);
}

/** A span to open for the work run in a trace: a message being processed, say. */
export interface TraceSpan {
  readonly name: string;
  readonly kind: 'consumer' | 'internal';
  readonly attributes?: Attributes;
}

function inSpan<T>(parent: Context, span: TraceSpan, fn: () => T, alongside?: AlongsideTrace): T {
  const tracer = trace.getTracer(TRACER);
  const opened = tracer.startSpan(span.name, { kind: span.kind === 'consumer' ? SpanKind.CONSUMER : SpanKind.INTERNAL, attributes: span.attributes }, parent);
  const failed = (error: unknown): void => {
    opened.recordException(error instanceof Error ? error : String(error));
    opened.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
  };
  const run = () => inTrace(formatSpanContext(opened.spanContext()), fn, alongside);
  let result: T;
  try {
    result = otelContext.with(trace.setSpan(parent, opened), run);
  } catch (error) {
    failed(error);
    opened.end();
    throw error;
  }
  if (result instanceof Promise) {
    return result.then(
      (value: unknown) => {
        opened.end();
        return value;
      },
      (error: unknown) => {
        failed(error);
        opened.end();
        throw error;
      },
    ) as T;
  }
  opened.end();
  return result;
}

/**
 * Runs `fn` in the trace `traceparent` (a valid one; otherwise a new trace is started). With spans
 * on, `span` opens a span for `fn` as a child of `traceparent`; without `span`, `fn` runs in the
 * caller's span when `traceparent` is its own (the gateway in its HTTP server span). `alongside`
 * (a tenant from `tenantScope`, a request id) is entered in the same scope as the trace.
 */
export function runWithTrace<T>(traceparent: string | undefined, fn: () => T, span?: TraceSpan, alongside?: AlongsideTrace): T {
  const parsed = parseTraceparent(traceparent);
  const valid = parsed ? (traceparent as string).trim() : undefined;
  if (!spansOn) return inTrace(valid ?? newTraceparent(), fn, alongside);
  const parent = parsed
    ? trace.setSpanContext(ROOT_CONTEXT, { traceId: parsed.traceId, spanId: parsed.parentId, traceFlags: Number.parseInt(parsed.flags, 16), isRemote: true })
    : ROOT_CONTEXT;
  if (span) return inSpan(parent, span, fn, alongside);
  if (valid && valid === activeSpanTraceparent()) return inTrace(valid, fn, alongside);
  return otelContext.with(parent, () => inTrace(valid ?? newTraceparent(), fn, alongside));
}

export function currentTraceparent(): string | undefined {
  return currentScope()?.traceparent;
}

/** The trace id of the current trace, for log lines. */
export function currentTraceId(): string | undefined {
  return parseTraceparent(currentScope()?.traceparent)?.traceId;
}

/**
 * The header that continues the current trace on an outgoing message; none outside a trace. With
 * spans on, the parent is the span the message is sent from; off, a new id stands for the hop.
 */
export function traceHeaders(): Record<string, string> {
  const active = activeSpanTraceparent();
  if (active) return { [TRACEPARENT_HEADER]: active };
  const current = currentScope()?.traceparent;
  return current ? { [TRACEPARENT_HEADER]: spansOn ? current : childTraceparent(current) } : {};
}
