import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from '@mission/runtime';
import { sendProblem } from './problem.responder';

/** A reply that records what was sent. */
function recordingReply(): { reply: FastifyReply; sent: { status?: number; body?: string } } {
  const sent: { status?: number; body?: string } = {};
  const reply = {
    status(code: number) {
      sent.status = code;
      return this;
    },
    headers() {
      return this;
    },
    send(body: string) {
      sent.body = body;
      return this;
    },
  } as unknown as FastifyReply;
  return { reply, sent };
}

function recordingLogger(): { logger: Logger; lines: unknown[] } {
  const lines: unknown[] = [];
  const record = (fields: unknown) => void lines.push(fields);
  return { logger: { error: record, warn: record, info: record, debug: record } as unknown as Logger, lines };
}

describe('sendProblem', () => {
  const request = { id: 'req-1', url: '/api/brain/query?q=confidential%20merger&k=3' } as FastifyRequest;

  it('logs an unexpected error with the query values redacted, and answers 500 without the query', () => {
    const { logger, lines } = recordingLogger();
    const { reply, sent } = recordingReply();
    sendProblem(new Error('boom'), request, reply, logger, 'https://errors.example/');
    expect(lines).toEqual([expect.objectContaining({ requestId: 'req-1', url: '/api/brain/query?q=REDACTED&k=REDACTED' })]);
    expect(JSON.stringify(lines)).not.toContain('confidential');
    expect(sent.status).toBe(500);
    expect(JSON.parse(sent.body ?? '{}').instance).toBe('/api/brain/query');
  });

  it('logs a dependency outage with the query values redacted', () => {
    const { logger, lines } = recordingLogger();
    const { reply, sent } = recordingReply();
    sendProblem(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }), request, reply, logger, 'https://errors.example/');
    expect(sent.status).toBe(503);
    expect(lines).toEqual([expect.objectContaining({ url: '/api/brain/query?q=REDACTED&k=REDACTED' })]);
  });
});
