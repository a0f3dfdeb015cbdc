import type { IncomingMessage } from 'node:http';
import { useOpenTelemetrySpans } from '@mission/tenant-context';
import { redactQueryString, redactSqlLiterals } from '../redaction';

/**
 * OpenTelemetry traces, off unless the standard variables ask for them: an exporter named in
 * `OTEL_TRACES_EXPORTER` (anything but `none`), or an OTLP endpoint in
 * `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` / `OTEL_EXPORTER_OTLP_ENDPOINT`. `OTEL_SDK_DISABLED=true`
 * turns them off whatever else is set. Everything else (protocol, headers, sampler, batch delays,
 * resource attributes, `OTEL_SERVICE_NAME`) is read by the SDK itself, as the specification says.
 */
export function tracingRequested(env: NodeJS.ProcessEnv = process.env): boolean {
  if ((env.OTEL_SDK_DISABLED ?? '').trim().toLowerCase() === 'true') return false;
  const exporters = (env.OTEL_TRACES_EXPORTER ?? '')
    .split(',')
    .map((name) => name.trim().toLowerCase())
    .filter(Boolean);
  if (exporters.length > 0) return !exporters.every((name) => name === 'none');
  return Boolean(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim() || env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim());
}

/** Probes and scrapes arrive every few seconds and say nothing about a request's path: no spans. */
const UNTRACED_PATHS = new Set(['/health/live', '/health/ready', '/metrics']);

export function isUntracedRequest(request: Pick<IncomingMessage, 'url'>): boolean {
  return UNTRACED_PATHS.has((request.url ?? '/').split('?')[0] ?? '/');
}

/**
 * `url.query` of an incoming request's span with every value redacted: applied over the
 * instrumentation's own attributes, so no query value is recorded.
 */
export function redactedIncomingAttributes(request: { url?: string }): Record<string, string> {
  const target = request.url ?? '';
  const mark = target.indexOf('?');
  return mark < 0 ? {} : { 'url.query': redactQueryString(target.slice(mark + 1)) };
}

/** `url.full` of an outgoing request's span with every query value redacted. */
export function redactedOutgoingAttributes(options: {
  protocol?: string | null;
  hostname?: string | null;
  host?: string | null;
  port?: number | string | null;
  path?: string | null;
}): Record<string, string> {
  const target = options.path ?? '';
  const mark = target.indexOf('?');
  if (mark < 0) return {};
  const host = options.hostname ?? options.host ?? 'localhost';
  const port = options.port ? `:${options.port}` : '';
  return { 'url.full': `${options.protocol ?? 'http:'}//${host}${port}${target.slice(0, mark)}?${redactQueryString(target.slice(mark + 1))}` };
}

interface TracingSdk {
  shutdown(): Promise<void>;
}

let sdk: TracingSdk | undefined;

/**
 * Starts the OpenTelemetry SDK for this process when the environment asks for traces (see
 * `tracingRequested`): spans for incoming and outgoing HTTP, PostgreSQL queries and Redis
 * commands, plus the bus's own spans for every message processed (`libs/messaging`), all
 * carried across Kafka in the `traceparent` header. Call it before anything else is loaded,
 * so the instrumented modules are patched when they are first required.
 */
export function startTracing(serviceName: string, env: NodeJS.ProcessEnv = process.env): boolean {
  if (sdk || !tracingRequested(env)) return Boolean(sdk);
  // Loaded only when asked for: a process without traces never loads the SDK.
  /* eslint-disable @typescript-eslint/no-require-imports */
  const { NodeSDK } = require('@opentelemetry/sdk-node') as typeof import('@opentelemetry/sdk-node');
  const { HttpInstrumentation } = require('@opentelemetry/instrumentation-http') as typeof import('@opentelemetry/instrumentation-http');
  const { PgInstrumentation } = require('@opentelemetry/instrumentation-pg') as typeof import('@opentelemetry/instrumentation-pg');
  const { IORedisInstrumentation } = require('@opentelemetry/instrumentation-ioredis') as typeof import('@opentelemetry/instrumentation-ioredis');
  /* eslint-enable @typescript-eslint/no-require-imports */
  const started = new NodeSDK({
    serviceName: env.OTEL_SERVICE_NAME?.trim() || serviceName,
    // Traces only: metrics are Prometheus's (/metrics) and logs are JSON lines on stdout. Without
    // these the SDK would also start OTLP metric and log exporters by default.
    metricReaders: [],
    logRecordProcessors: [],
    instrumentations: [
      // Query values carry tenant content (a Brain search's `q`, cursors): spans keep the names only.
      new HttpInstrumentation({
        ignoreIncomingRequestHook: isUntracedRequest,
        startIncomingSpanHook: redactedIncomingAttributes,
        startOutgoingSpanHook: redactedOutgoingAttributes,
      }),
      // Statement text only (no bound values, and inlined ones redacted: they carry tenant ids and
      // payloads), and only inside a trace: the outbox relay's polling would otherwise be a root
      // trace every few hundred ms.
      new PgInstrumentation({
        enhancedDatabaseReporting: false,
        requireParentSpan: true,
        requestHook: (span, { query }) => {
          if (query.text.includes("'")) span.setAttribute('db.query.text', redactSqlLiterals(query.text));
        },
      }),
      // Command names only: values are tenant data and keys carry tenant ids.
      new IORedisInstrumentation({ dbStatementSerializer: (command) => command, requireParentSpan: true }),
    ],
  });
  started.start();
  sdk = started;
  useOpenTelemetrySpans(true);
  return true;
}

/** Flushes and stops the SDK (spans still buffered are exported); nothing when traces are off. */
export async function stopTracing(): Promise<void> {
  const running = sdk;
  sdk = undefined;
  useOpenTelemetrySpans(false);
  await running?.shutdown();
}
