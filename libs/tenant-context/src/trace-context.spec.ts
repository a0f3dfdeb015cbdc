import { context, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import {
  activeSpanTraceparent,
  childTraceparent,
  currentTraceparent,
  describeActiveSpan,
  newTraceparent,
  parseTraceparent,
  runWithTrace,
  TRACEPARENT_HEADER,
  traceHeaders,
  useOpenTelemetrySpans,
} from './trace-context';
import { optionalTenant, tenantScope } from './tenant-context';

/** The trace context with OpenTelemetry recording: real spans, parented across hops by `traceparent`. */
describe('trace context with OpenTelemetry spans', () => {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const contextManager = new AsyncLocalStorageContextManager();
  const incoming = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
  const consumer = { name: 'process mission.requests.v1', kind: 'consumer' as const, attributes: { 'messaging.system': 'kafka' } };

  beforeAll(() => {
    context.setGlobalContextManager(contextManager.enable());
    trace.setGlobalTracerProvider(provider);
  });
  beforeEach(() => {
    exporter.reset();
    useOpenTelemetrySpans(true);
  });
  afterAll(async () => {
    useOpenTelemetrySpans(false);
    await provider.shutdown();
    context.disable();
  });

  it('opens a span for a message as a child of its traceparent, and sends its own id onward', async () => {
    const seen = await runWithTrace(
      incoming,
      async () => {
        await new Promise((resolve) => setTimeout(resolve, 5));
        return { current: currentTraceparent(), outgoing: traceHeaders()[TRACEPARENT_HEADER], active: activeSpanTraceparent() };
      },
      consumer,
    );
    const [span] = exporter.getFinishedSpans();
    expect(exporter.getFinishedSpans()).toHaveLength(1);
    expect(span.name).toBe('process mission.requests.v1');
    expect(span.kind).toBe(SpanKind.CONSUMER);
    expect(span.attributes['messaging.system']).toBe('kafka');
    expect(span.spanContext().traceId).toBe('4bf92f3577b34da6a3ce929d0e0e4736');
    expect(span.parentSpanContext?.spanId).toBe('00f067aa0ba902b7');
    const own = `00-${span.spanContext().traceId}-${span.spanContext().spanId}-01`;
    expect(seen).toEqual({ current: own, outgoing: own, active: own });
  });

  it("enters what goes alongside (a tenant) in the span's scope", async () => {
    const tenantId = '11111111-1111-4111-8111-111111111111';
    const seen = await runWithTrace(incoming, async () => ({ tenant: optionalTenant()?.tenantId, current: currentTraceparent() }), consumer, tenantScope({ tenantId }));
    const [span] = exporter.getFinishedSpans();
    expect(seen).toEqual({ tenant: tenantId, current: `00-${span.spanContext().traceId}-${span.spanContext().spanId}-01` });
  });

  it('parents spans made inside (a database query, say) to the message span', async () => {
    await runWithTrace(incoming, async () => trace.getTracer('test').startActiveSpan('SELECT', (span) => span.end()), consumer);
    const [inner, outer] = exporter.getFinishedSpans();
    expect(inner.name).toBe('SELECT');
    expect(inner.parentSpanContext?.spanId).toBe(outer.spanContext().spanId);
  });

  it('marks the span failed when the work throws or rejects, and passes the error on', async () => {
    await expect(runWithTrace(incoming, async () => Promise.reject(new Error('handler failed')), consumer)).rejects.toThrow('handler failed');
    expect(() =>
      runWithTrace(
        incoming,
        () => {
          throw new Error('sync failure');
        },
        consumer,
      ),
    ).toThrow('sync failure');
    const spans = exporter.getFinishedSpans();
    expect(spans.map((span) => [span.status.code, span.status.message])).toEqual([
      [SpanStatusCode.ERROR, 'handler failed'],
      [SpanStatusCode.ERROR, 'sync failure'],
    ]);
    expect(spans.every((span) => span.events.some((event) => event.name === 'exception'))).toBe(true);
  });

  it('starts a new trace for a message without a valid traceparent', () => {
    const current = runWithTrace('garbage', () => currentTraceparent(), consumer);
    const [span] = exporter.getFinishedSpans();
    expect(span.parentSpanContext).toBeUndefined();
    expect(parseTraceparent(current)?.traceId).toBe(span.spanContext().traceId);
  });

  it('runs in the active span when given its own traceparent (the gateway in its HTTP server span), and names it', () => {
    trace.getTracer('test').startActiveSpan('POST', { kind: SpanKind.SERVER }, (server) => {
      const own = activeSpanTraceparent();
      const inside = runWithTrace(own, () => ({ current: currentTraceparent(), active: activeSpanTraceparent() }));
      expect(inside).toEqual({ current: own, active: own });
      describeActiveSpan('POST /api/missions', { 'http.route': '/api/missions' });
      server.end();
    });
    const [server] = exporter.getFinishedSpans();
    expect(exporter.getFinishedSpans()).toHaveLength(1);
    expect(server.name).toBe('POST /api/missions');
    expect(server.attributes['http.route']).toBe('/api/missions');
  });

  it('makes no spans when OpenTelemetry is off, and still carries the trace', () => {
    useOpenTelemetrySpans(false);
    const outgoing = runWithTrace(incoming, () => traceHeaders()[TRACEPARENT_HEADER], consumer);
    expect(exporter.getFinishedSpans()).toEqual([]);
    expect(parseTraceparent(outgoing)?.traceId).toBe('4bf92f3577b34da6a3ce929d0e0e4736');
    expect(activeSpanTraceparent()).toBeUndefined();
  });

  it('makes valid, distinct trace and span ids well past one refill of its random pool', () => {
    const made = Array.from({ length: 1_000 }, () => newTraceparent());
    expect(made.every((value) => parseTraceparent(value) !== undefined)).toBe(true);
    expect(new Set(made.map((value) => parseTraceparent(value)?.traceId)).size).toBe(made.length);
    const children = made.slice(0, 300).map((value) => childTraceparent(value));
    expect(new Set(children.map((value) => value.split('-')[2])).size).toBe(children.length);
    expect(children.map((value) => parseTraceparent(value)?.traceId)).toEqual(made.slice(0, 300).map((value) => parseTraceparent(value)?.traceId));
  });
});
