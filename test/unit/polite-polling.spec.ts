import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { politeCall, politeFetch, retryAfterMs, waitForMission } from '../support/api-client';

interface Seen {
  readonly method: string;
  readonly body: string;
  readonly at: number;
}

/** A server answering each request with the next of `answers` (the last one repeats), recording what it was sent. */
async function serve(answers: Array<{ status: number; headers?: Record<string, string>; body?: unknown }>): Promise<{ url: string; seen: Seen[]; close(): Promise<void> }> {
  const seen: Seen[] = [];
  const server = http.createServer((request, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
    request.on('end', () => {
      seen.push({ method: request.method ?? '', body, at: Date.now() });
      const answer = answers[Math.min(seen.length, answers.length) - 1] ?? { status: 500 };
      response.writeHead(answer.status, { 'content-type': 'application/json', ...answer.headers });
      response.end(JSON.stringify(answer.body ?? {}));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

const limited = { status: 429, headers: { 'retry-after': '1' }, body: { code: 'rate_limited' } };

describe('polling the API politely', () => {
  it('reads Retry-After from a 429, and from a 503 only for a GET', () => {
    const headers = (value: string) => new Headers({ 'retry-after': value });
    expect(retryAfterMs('POST', { status: 429, headers: headers('2') })).toBe(2_000);
    expect(retryAfterMs('GET', { status: 503, headers: headers('3') })).toBe(3_000);
    expect(retryAfterMs('POST', { status: 503, headers: headers('3') })).toBeUndefined();
    expect(retryAfterMs('GET', { status: 200, headers: headers('3') })).toBeUndefined();
    expect(retryAfterMs('GET', { status: 429, headers: new Headers() })).toBe(1_000);
    const inTwoSeconds = new Date(Date.now() + 2_000).toUTCString();
    expect(retryAfterMs('GET', { status: 429, headers: headers(inTwoSeconds) })).toBeGreaterThan(0);
  });

  it('asks again only after the Retry-After of a 429, then returns the answer', async () => {
    const server = await serve([limited, { status: 200, body: { ok: true } }]);
    try {
      const response = await politeCall(server.url, 'GET', '/api/missions');
      expect(response.status).toBe(200);
      expect(server.seen).toHaveLength(2);
      expect((server.seen[1]?.at ?? 0) - (server.seen[0]?.at ?? 0)).toBeGreaterThanOrEqual(990);
    } finally {
      await server.close();
    }
  });

  it('returns a POST’s 503 at once: the request may have been carried out', async () => {
    const server = await serve([{ status: 503, headers: { 'retry-after': '1' } }, { status: 202 }]);
    try {
      expect((await politeCall(server.url, 'POST', '/api/missions', { body: { title: 'T' } })).status).toBe(503);
      expect(server.seen).toHaveLength(1);
    } finally {
      await server.close();
    }
  });

  it('gives up once waiting would outlast its patience, returning the refusal', async () => {
    const server = await serve([limited]);
    try {
      expect((await politeCall(server.url, 'GET', '/api/missions', {}, 500)).status).toBe(429);
      expect(server.seen).toHaveLength(1);
    } finally {
      await server.close();
    }
  });

  it('waits for a mission through a 429 instead of failing on it', async () => {
    const server = await serve([{ status: 200, body: { status: 'running' } }, limited, { status: 200, body: { id: 'm', status: 'succeeded' } }]);
    try {
      await expect(waitForMission(server.url, 'token', 'm', 10_000)).resolves.toEqual({ id: 'm', status: 'succeeded' });
      expect(server.seen).toHaveLength(3);
      expect((server.seen[2]?.at ?? 0) - (server.seen[1]?.at ?? 0)).toBeGreaterThanOrEqual(990);
    } finally {
      await server.close();
    }
  });

  it('sends the same request again, body and all, through a fetch for clients that take one', async () => {
    const server = await serve([limited, { status: 200, body: { ok: true } }]);
    try {
      const response = await politeFetch()(new Request(`${server.url}/mcp`, { method: 'POST', body: '{"jsonrpc":"2.0"}' }));
      expect(response.status).toBe(200);
      expect(server.seen.map(({ method, body }) => ({ method, body }))).toEqual([
        { method: 'POST', body: '{"jsonrpc":"2.0"}' },
        { method: 'POST', body: '{"jsonrpc":"2.0"}' },
      ]);
      expect((server.seen[1]?.at ?? 0) - (server.seen[0]?.at ?? 0)).toBeGreaterThanOrEqual(990);
    } finally {
      await server.close();
    }
  });
});
