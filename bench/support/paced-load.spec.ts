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
    // How many are answered is the machine's doing: a starved one (CI's two busy cores) answers
    // fewer in the second and reports the rest unsent, which is what the run is for. Some are.
    expect(result.ok).toBeGreaterThanOrEqual(20);
    // Counted in the second they were answered: only those in flight as it ends (one per connection) may land after it.
    expect(result.perSecond[0]).toBeGreaterThanOrEqual(result.ok - 4);
    expect(result.errors + result.non2xx + result.mismatches).toBe(0);
    const gaps = server.arrivals.slice(1).map((at, index) => at - (server.arrivals[index] as number));
    gaps.sort((a, b) => a - b);
    // 5 ms apart; a second's share sent back to back (autocannon's overallRate) would be microseconds apart.
    const medianGap = gaps[Math.floor(gaps.length / 2)] as number;
    expect(medianGap).toBeGreaterThan(2);
    expect(medianGap).toBeLessThan(9);
    // The whole second, not its start: no 100 ms holds more than half of them (evenly, a tenth do;
    // a second's share sent at once puts them all in the first), and they span more than half of it.
    // The margins let a busy machine hold the sending up for 400 ms without failing the test.
    const first = server.arrivals[0] as number;
    const perTenth = new Map<number, number>();
    for (const at of server.arrivals) perTenth.set(Math.floor((at - first) / 100), (perTenth.get(Math.floor((at - first) / 100)) ?? 0) + 1);
    expect(Math.max(...perTenth.values())).toBeLessThanOrEqual(server.arrivals.length / 2);
    expect((server.arrivals.at(-1) as number) - first).toBeGreaterThan(500);
  });

  it('charges a stall to every request due during it, not only to those on the stalled connections', async () => {
    // Requests arriving between 300 and 500 ms into the run are held until 500 ms.
    const server = await serve((request, response, sinceFirstMs) => {
      if (sinceFirstMs >= 300 && sinceFirstMs < 500) setTimeout(() => ok(request, response, sinceFirstMs), 500 - sinceFirstMs);
      else ok(request, response, sinceFirstMs);
    });
    close = server.close;
    const result = await runPacedLoad({ origin: server.origin, requests, connections: 2, pipelining: 1, rate: 100, durationSeconds: 1, timeoutSeconds: 5 });
    // Every request sent was answered; those a starved machine could not send in the second are
    // reported unsent instead, so ok is not exactly 100 there.
    expect(result.ok + result.pacing.unsent).toBe(100);
    expect(result.ok).toBeGreaterThanOrEqual(20);
    expect(server.arrivals.length).toBe(result.ok);
    // Two connections were held; about 15 more requests fell due while both were: each waited.
    // Latency from the moment of sending would put only two requests above a few milliseconds.
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
    // The run takes about 1.1 s; sending the 80 late would take 5 s, waiting for its deadline 11 s.
    expect(performance.now() - started).toBeLessThan(4_000);
    expect(result.pacing.unsent).toBeGreaterThan(50);
    expect(result.ok + result.pacing.unsent).toBeLessThanOrEqual(100);
    expect(result.requestsPerSecond.mean).toBeLessThan(30);
    expect(result.latencyMs.max).toBeGreaterThan(500);
  });

  it('stops at once when asked, failing the requests in flight instead of waiting for their timeout', async () => {
    const server = await serve(() => undefined);
    close = server.close;
    const running = runPacedLoad({ origin: server.origin, requests, connections: 2, pipelining: 1, rate: 20, durationSeconds: 5, timeoutSeconds: 30 });
    // Stopped once both connections hold a request the server never answers.
    const deadline = performance.now() + 4_000;
    while (server.arrivals.length < 2 && performance.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(server.arrivals).toHaveLength(2);
    const stoppedAt = performance.now();
    stopLoad();
    const result = await running;
    // At once: well inside the 4 s left of the run and the requests' 30 s timeout.
    expect(performance.now() - stoppedAt).toBeLessThan(2_000);
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
    // Every request sent was answered (60, unless a starved machine could not send them all in the
    // second: the rest are unsent); each third answer was a 503, each first a wrong body.
    expect(result.responses + result.pacing.unsent).toBe(60);
    expect(result.responses).toBe(count);
    expect(count).toBeGreaterThanOrEqual(10);
    expect(result.non2xx).toBe(Math.floor(count / 3));
    expect(result.mismatches).toBe(Math.floor((count + 2) / 3));
    expect(result.ok).toBe(Math.floor((count + 1) / 3));
    expect(result.statusCodes).toEqual({ 200: count - Math.floor(count / 3), 503: Math.floor(count / 3) });
  });

  it('refuses settings it cannot honour', async () => {
    const settings = { origin: 'http://127.0.0.1:9', requests, connections: 1, pipelining: 1, rate: 10, durationSeconds: 1, timeoutSeconds: 1 };
    await expect(runPacedLoad({ ...settings, rate: 0 })).rejects.toThrow('rate above 0');
    await expect(runPacedLoad({ ...settings, pipelining: 2 })).rejects.toThrow('pipelining 1');
  });
});
