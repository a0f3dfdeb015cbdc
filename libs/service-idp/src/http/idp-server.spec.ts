import type { Server } from 'node:http';
import { Registry } from 'prom-client';
import { closeServer, createIdpServer, idpRoute, listen, Readiness } from './idp-server';

describe('idp HTTP server', () => {
  let server: Server;
  let base: string;
  let readiness: () => Promise<Readiness>;
  let handled: string[];
  let errors: unknown[];
  let handle: (url: string) => Promise<void>;
  let registry: Registry;

  beforeEach(async () => {
    handled = [];
    errors = [];
    readiness = async () => ({ up: true, details: { database: 'up' } });
    handle = async () => undefined;
    registry = new Registry();
    server = createIdpServer({
      metrics: registry,
      handle: async (req, res) => {
        handled.push(req.url ?? '');
        await handle(req.url ?? '');
        res.end('provider');
      },
      ready: () => readiness(),
      onError: (error) => errors.push(error),
    });
    const address = await listen(server, 0, '127.0.0.1');
    base = `http://127.0.0.1:${address.port}`;
  });

  afterEach(async () => {
    await closeServer(server, 1_000);
  });

  it('sends HSTS on every response when asked (an https issuer), and none otherwise', async () => {
    expect((await fetch(`${base}/token`)).headers.get('strict-transport-security')).toBeNull();
    const secured = createIdpServer({ hsts: true, handle: async (_req, res) => void res.end('provider'), ready: () => readiness(), onError: (error) => errors.push(error) });
    const address = await listen(secured, 0, '127.0.0.1');
    try {
      for (const path of ['/token', '/health/live', '/.well-known/openid-configuration']) {
        expect((await fetch(`http://127.0.0.1:${address.port}${path}`)).headers.get('strict-transport-security')).toBe('max-age=31536000; includeSubDomains');
      }
    } finally {
      await closeServer(secured, 1_000);
    }
  });

  it('gives a client a bounded time to send its request', () => {
    expect({ request: server.requestTimeout, headers: server.headersTimeout }).toEqual({ request: 60_000, headers: 20_000 });
  });

  it('answers liveness itself, without the provider', async () => {
    const response = await fetch(`${base}/health/live`);
    expect(response.status).toBe(200);
    expect(response.headers.get('cache-control')).toBe('no-store');
    await expect(response.json()).resolves.toEqual({ status: 'up' });
    expect(handled).toEqual([]);
  });

  it('reports readiness without details (they are for the operations port): 200 when up, 503 when down or failing', async () => {
    await expect((await fetch(`${base}/health/ready`)).json()).resolves.toEqual({ status: 'up' });
    readiness = async () => ({ up: false, details: { database: 'down' } });
    const down = await fetch(`${base}/health/ready?verbose=1`);
    expect(down.status).toBe(503);
    await expect(down.json()).resolves.toEqual({ status: 'down' });
    readiness = async () => {
      throw new Error('boom');
    };
    const failing = await fetch(`${base}/health/ready`);
    expect(failing.status).toBe(503);
    await expect(failing.json()).resolves.toEqual({ status: 'down' });
    expect(errors).toHaveLength(1);
  });

  it('refuses other methods on health paths', async () => {
    const response = await fetch(`${base}/health/live`, { method: 'POST' });
    expect(response.status).toBe(405);
    expect(response.headers.get('allow')).toBe('GET, HEAD');
  });

  it('hands every other request to the provider, and turns its failures into a bare 500', async () => {
    await expect((await fetch(`${base}/.well-known/openid-configuration`)).text()).resolves.toBe('provider');
    expect(handled).toEqual(['/.well-known/openid-configuration']);
    handle = async () => {
      throw new Error('internal detail');
    };
    const failed = await fetch(`${base}/token`, { method: 'POST' });
    expect(failed.status).toBe(500);
    await expect(failed.json()).resolves.toEqual({ error: 'server_error' });
    expect(errors).toHaveLength(1);
  });

  it('counts every request by method, route template and status, ids never in a label, and serves no metrics itself', async () => {
    await fetch(`${base}/interaction/Qx1-secret-uid`);
    await fetch(`${base}/interaction/Qx1-secret-uid/login`, { method: 'POST' });
    await fetch(`${base}/no/such/path/9f8e7d`);
    await fetch(`${base}/health/live`);
    // The registry goes out on the operations port (startHealthServer), never on the public one:
    // here /metrics is just another path for the provider.
    await fetch(`${base}/metrics`);
    expect(handled).toContain('/metrics');
    const text = await registry.metrics();
    const count = (labels: string): number => Number(new RegExp(`^http_server_request_duration_seconds_count\\{${labels}\\} (\\d+)$`, 'm').exec(text)?.[1] ?? 0);
    expect(count('method="GET",route="/interaction/:uid",status_code="200"')).toBe(1);
    expect(count('method="POST",route="/interaction/:uid/login",status_code="200"')).toBe(1);
    expect(count('method="GET",route="unmatched",status_code="200"')).toBe(2);
    expect(count('method="GET",route="/health/live",status_code="200"')).toBe(1);
    expect(text).not.toContain('Qx1-secret-uid');
    expect(text).not.toContain('9f8e7d');
  });

  it('counts paths under fixed routes or templates only', () => {
    expect(idpRoute('/token')).toBe('/token');
    expect(idpRoute('/.well-known/openid-configuration')).toBe('/.well-known/openid-configuration');
    expect(idpRoute('/auth/abc')).toBe('/auth/:uid');
    expect(idpRoute('/auth/abc/def')).toBe('unmatched');
    expect(idpRoute('/interaction/u1/login')).toBe('/interaction/:uid/login');
    expect(idpRoute('/token/extra')).toBe('unmatched');
  });
});
