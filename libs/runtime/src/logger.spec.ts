import { runWithRequestId, runWithTenant, runWithTrace } from '@mission/tenant-context';
import { createLogger, logFormat } from './logger';

/** What the logger writes to stdout while `write` runs (pino writes through process.stdout). */
function capturedText(write: () => void): string {
  const lines: string[] = [];
  const original = process.stdout.write.bind(process.stdout);
  process.stdout.write = ((chunk: string | Uint8Array) => {
    lines.push(String(chunk));
    return true;
  }) as typeof process.stdout.write;
  try {
    write();
  } finally {
    process.stdout.write = original;
  }
  return lines.join('');
}

/** The JSON lines written while `write` runs. */
function captured(write: () => void): Array<Record<string, unknown>> {
  return capturedText(write)
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

describe('structured logs', () => {
  it('carry the request id, tenant and trace of the context they were written in', () => {
    const logger = createLogger('test', 'info', 'json');
    const tenantId = '3c1d9f7e-2b4a-4c5d-8e6f-7a8b9c0d1e2f';
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const [line] = captured(() => runWithRequestId('req-1', () => runWithTrace(traceparent, () => runWithTenant({ tenantId }, () => logger.info('handled')))));
    expect(line).toMatchObject({ service: 'test', msg: 'handled', requestId: 'req-1', tenantId, traceId: '4bf92f3577b34da6a3ce929d0e0e4736' });
    const [outside] = captured(() => logger.info('idle'));
    expect(Object.keys(outside)).not.toEqual(expect.arrayContaining(['requestId']));
    expect(outside.tenantId).toBeUndefined();
  });

  it('never writes credentials or keys, at the top level or one level down', () => {
    const logger = createLogger('test', 'info', 'json');
    const secrets = {
      authorization: 'Bearer eyJ.secret',
      headers: { authorization: 'Bearer eyJ.secret', cookie: '_session=secret' },
      body: { password: 'hunter2-secret', clientSecret: 'cs-secret', refresh_token: 'rt-secret', access_token: 'at-secret' },
      config: { KEK: 'kek-secret', BRAIN_INDEX_KEY: 'bik-secret' },
      token: 'plain-secret',
    };
    const [line] = captured(() => logger.info(secrets, 'request'));
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
    const logger = createLogger('test', 'info', 'pretty');
    const text = capturedText(() => logger.info({ port: 3000, token: 'plain-secret' }, 'Gateway listening')).replace(/\u001b\[[0-9;]*m/g, '');
    expect(text.trim().split('\n')).toHaveLength(1);
    expect(text).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO \(test\): Gateway listening/);
    expect(text).toContain('"port":3000');
    expect(text).not.toContain('plain-secret');
    expect(() => JSON.parse(text)).toThrow();
  });
});
