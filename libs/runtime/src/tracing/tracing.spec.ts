import { isUntracedRequest, tracingRequested } from './tracing';

describe('tracing switch', () => {
  it.each([
    [{}, false],
    [{ OTEL_TRACES_EXPORTER: 'otlp' }, true],
    [{ OTEL_TRACES_EXPORTER: ' none ' }, false],
    [{ OTEL_TRACES_EXPORTER: 'none,otlp' }, true],
    [{ OTEL_TRACES_EXPORTER: 'console' }, true],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }, true],
    [{ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318/v1/traces' }, true],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: '  ' }, false],
    [{ OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }, false],
    [{ OTEL_SDK_DISABLED: 'TRUE', OTEL_TRACES_EXPORTER: 'otlp' }, false],
    [{ OTEL_SDK_DISABLED: 'false', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }, true],
    [{ OTEL_SERVICE_NAME: 'gateway' }, false],
  ])('traces with %j: %s', (env, expected) => {
    expect(tracingRequested(env)).toBe(expected);
  });

  it('leaves probes and scrapes out of the traces, not the API', () => {
    expect(['/health/live', '/health/ready?x=1', '/metrics'].map((url) => isUntracedRequest({ url }))).toEqual([true, true, true]);
    expect(['/api/missions', '/health', '/metrics/x', '/token'].map((url) => isUntracedRequest({ url }))).toEqual([false, false, false, false]);
  });
});
