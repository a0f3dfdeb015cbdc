import { runWithRequestId, runWithTenant, runWithTrace } from '@mission/tenant-context';
import { createLogger, logFormat } from './logger';

/** A logger of `format` whose lines `written` returns, and forgets, on each call. */
function capturingLogger(format: 'json' | 'pretty'): { logger: ReturnType<typeof createLogger>; written: () => string } {
  let lines: string[] = [];
  const logger = createLogger('test', 'info', format, { write: (line) => void lines.push(line) });
  return {
    logger,
    written: () => {
      const text = lines.join('');
      lines = [];
      return text;
    },
  };
}

/** The JSON lines a logger wrote. */
function jsonLines(text: string): Array<Record<string, unknown>> {
  return text
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

describe('structured logs', () => {
  it('carry the request id, tenant and trace of the context they were written in', () => {
    const { logger, written } = capturingLogger('json');
    const tenantId = '3c1d9f7e-2b4a-4c5d-8e6f-7a8b9c0d1e2f';
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    runWithRequestId('req-1', () => runWithTrace(traceparent, () => runWithTenant({ tenantId }, () => logger.info('handled'))));
    const [line] = jsonLines(written());
    expect(line).toMatchObject({ service: 'test', msg: 'handled', requestId: 'req-1', tenantId, traceId: '4bf92f3577b34da6a3ce929d0e0e4736' });
    logger.info('idle');
    const [outside] = jsonLines(written());
    expect(Object.keys(outside)).not.toEqual(expect.arrayContaining(['requestId']));
    expect(outside.tenantId).toBeUndefined();
  });

  it('never writes credentials or keys, at the top level or one level down', () => {
    const { logger, written } = capturingLogger('json');
    const secrets = {
      authorization: 'Bearer eyJ.secret',
      headers: { authorization: 'Bearer eyJ.secret', cookie: '_session=secret' },
      body: { password: 'hunter2-secret', clientSecret: 'cs-secret', refresh_token: 'rt-secret', access_token: 'at-secret' },
      config: { KEK: 'kek-secret', BRAIN_INDEX_KEY: 'bik-secret' },
      token: 'plain-secret',
    };
    logger.info(secrets, 'request');
    const [line] = jsonLines(written());
    expect(JSON.stringify(line)).not.toContain('secret');
    expect(line).toMatchObject({ authorization: '[redacted]', headers: { authorization: '[redacted]', cookie: '[redacted]' }, body: { password: '[redacted]' } });
  });
});

describe('log format', () => {
  it('is readable at a terminal and JSON elsewhere, unless LOG_FORMAT says', () => {
    expect(logFormat({}, true)).toBe('pretty');
    expect(logFormat({}, false)).toBe('json');
    expect(logFormat({ LOG_FORMAT: 'json' }, true)).toBe('json');
    expect(logFormat({ LOG_FORMAT: ' Pretty ' }, false)).toBe('pretty');
    expect(logFormat({ LOG_FORMAT: 'xml' }, false)).toBe('json');
  });

  it('writes one readable line per entry at a terminal, with credentials redacted as in JSON', () => {
    const { logger, written } = capturingLogger('pretty');
    logger.info({ port: 3000, token: 'plain-secret' }, 'Gateway listening');
    const text = written().replace(/\u001b\[[0-9;]*m/g, '');
    expect(text.trim().split('\n')).toHaveLength(1);
    expect(text).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO \(test\): Gateway listening/);
    expect(text).toContain('"port":3000');
    expect(text).not.toContain('plain-secret');
    expect(() => JSON.parse(text)).toThrow();
  });
});
