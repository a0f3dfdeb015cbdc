import type { Server } from 'node:http';
import { closeServer, createIdpServer, listen, Readiness } from './idp-server';

describe('idp HTTP server', () => {
  let server: Server;
  let base: string;
  let readiness: () => Promise<Readiness>;
  let handled: string[];
  let errors: unknown[];
  let handle: (url: string) => Promise<void>;

  beforeEach(async () => {
    handled = [];
    errors = [];
    readiness = async () => ({ up: true, details: { database: 'up' } });
    handle = async () => undefined;
    server = createIdpServer({
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

  it('answers liveness itself, without the provider', async () => {
    const response = await fetch(`${base}/health/live`);
    expect(response.status).toBe(200);
    expect(response.headers.get('cache-control')).toBe('no-store');
    await expect(response.json()).resolves.toEqual({ status: 'up' });
    expect(handled).toEqual([]);
  });

  it('reports readiness with details: 200 when up, 503 when down or failing', async () => {
    await expect((await fetch(`${base}/health/ready`)).json()).resolves.toEqual({ status: 'up', details: { database: 'up' } });
    readiness = async () => ({ up: false, details: { database: 'down' } });
    const down = await fetch(`${base}/health/ready?verbose=1`);
    expect(down.status).toBe(503);
    await expect(down.json()).resolves.toEqual({ status: 'down', details: { database: 'down' } });
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
});
