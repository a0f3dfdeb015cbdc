import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { runLoad, stopLoad } from './load';
import { runPacedLoad } from './paced-load';

type Answer = (request: http.IncomingMessage, response: http.ServerResponse, sinceFirstMs: number) => void;

/** A local server that notes when each request arrived and answers as `answer` says. */
async function serve(answer: Answer): Promise<{ origin: string; arrivals: number[]; close: () => Promise<void> }> {
  const arrivals: number[] = [];
  const server = http.createServer((request, response) => {
    const now = performance.now();
    arrivals.push(now);
    answer(request, response, now - (arrivals[0] as number));
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.1:${port}`,
    arrivals,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

const BODY = '{"id":"m-1"}';
const requests = [{ path: '/m', headers: { authorization: 'Bearer t' }, body: BODY }];
const ok: Answer = (_request, response) => response.writeHead(200, { 'content-type': 'application/json' }).end(BODY);

describe('runPacedLoad', () => {
  let close: (() => Promise<void>) | undefined;
  afterEach(async () => {
    await close?.();
    close = undefined;
  });

  it('spaces requests evenly at the offered rate instead of sending each second at once', async () => {
    const server = await serve(ok);
    close = server.close;
    const result = await runLoad({ origin: server.origin, requests, connections: 4, pipelining: 1, rate: 200, durationSeconds: 1, timeoutSeconds: 5 });
    // Every request due was answered, or (a starved machine) was still waiting for a connection when
    // the run ended and is reported unsent; either way none is lost from the count.
    expect(result.ok + (result.pacing?.unsent ?? -1)).toBe(200);
    expect(result.ok).toBeGreaterThanOrEqual(195);
    // Counted in the second they were answered: the last few may land just after it ends.
    expect(result.perSecond[0]).toBeGreaterThanOrEqual(190);
    expect(result.errors + result.non2xx + result.mismatches).toBe(0);
    const gaps = server.arrivals.slice(1).map((at, index) => at - (server.arrivals[index] as number));
    gaps.sort((a, b) => a - b);
    // 5 ms apart; a second's share sent back to back (autocannon's overallRate) would be microseconds apart.
    const medianGap = gaps[Math.floor(gaps.length / 2)] as number;
    expect(medianGap).toBeGreaterThan(2);
    expect(medianGap).toBeLessThan(9);
    // The whole second, not its start.
    expect((server.arrivals.at(-1) as number) - (server.arrivals[0] as number)).toBeGreaterThan(900);
  });

  it('charges a stall to every request due during it, not only to those on the stalled connections', async () => {
    // Requests arriving between 300 and 500 ms into the run are held until 500 ms.
    const server = await serve((request, response, sinceFirstMs) => {
      if (sinceFirstMs >= 300 && sinceFirstMs < 500) setTimeout(() => ok(request, response, sinceFirstMs), 500 - sinceFirstMs);
      else ok(request, response, sinceFirstMs);
    });
    close = server.close;
    const result = await runPacedLoad({ origin: server.origin, requests, connections: 2, pipelining: 1, rate: 100, durationSeconds: 1, timeoutSeconds: 5 });
    expect(result.ok).toBe(100);
    // Two connections were held; about 15 more requests fell due while both were: each waited.
    // Latency from the moment of sending would put only two requests above a few milliseconds.
    expect(server.arrivals.length).toBe(100);
    expect(result.latencyMs.p90).toBeGreaterThanOrEqual(50);
    expect(result.latencyMs.max).toBeGreaterThanOrEqual(150);
    expect(result.pacing.sendLagMs.max).toBeGreaterThanOrEqual(100);
  });

  it('reports what the server could not keep up with: requests left unsent, the rate it answered, and ends on time', async () => {
    const server = await serve((request, response, sinceFirstMs) => setTimeout(() => ok(request, response, sinceFirstMs), 50));
    close = server.close;
    const started = performance.now();
    const result = await runPacedLoad({ origin: server.origin, requests, connections: 1, pipelining: 1, rate: 100, durationSeconds: 1, timeoutSeconds: 10 });
    // About 20 answered in the second; the other 80 were due but never sent, not sent late.
    expect(performance.now() - started).toBeLessThan(3_000);
    expect(result.pacing.unsent).toBeGreaterThan(50);
    expect(result.ok + result.pacing.unsent).toBeLessThanOrEqual(100);
    expect(result.requestsPerSecond.mean).toBeLessThan(30);
    expect(result.latencyMs.max).toBeGreaterThan(500);
  });

  it('stops at once when asked, failing the requests in flight instead of waiting for their timeout', async () => {
    const server = await serve(() => undefined);
    close = server.close;
    const running = runPacedLoad({ origin: server.origin, requests, connections: 2, pipelining: 1, rate: 20, durationSeconds: 5, timeoutSeconds: 30 });
    await new Promise((resolve) => setTimeout(resolve, 300));
    const stoppedAt = performance.now();
    stopLoad();
    const result = await running;
    expect(performance.now() - stoppedAt).toBeLessThan(1_000);
    expect(result.ok).toBe(0);
    expect(result.errors).toBe(2);
  });

  it('counts other bodies as mismatches and other statuses as non-2xx, and never as latencies', async () => {
    let count = 0;
    const server = await serve((_request, response) => {
      count++;
      if (count % 3 === 0) response.writeHead(503).end('busy');
      else if (count % 3 === 1) response.writeHead(200).end('{"id":"m-2"}');
      else response.writeHead(200).end(BODY);
    });
    close = server.close;
    const result = await runPacedLoad({ origin: server.origin, requests, connections: 2, pipelining: 1, rate: 60, durationSeconds: 1, timeoutSeconds: 5 });
    expect(result.responses).toBe(60);
    expect(result.non2xx).toBe(20);
    expect(result.mismatches).toBe(20);
    expect(result.ok).toBe(20);
    expect(result.statusCodes).toEqual({ 200: 40, 503: 20 });
  });

  it('refuses settings it cannot honour', async () => {
    const settings = { origin: 'http://127.0.0.1:9', requests, connections: 1, pipelining: 1, rate: 10, durationSeconds: 1, timeoutSeconds: 1 };
    await expect(runPacedLoad({ ...settings, rate: 0 })).rejects.toThrow('rate above 0');
    await expect(runPacedLoad({ ...settings, pipelining: 2 })).rejects.toThrow('pipelining 1');
  });
});
