import http from 'node:http';
import { startHealthServer } from './health-server';

describe('startHealthServer', () => {
  it('closes while a poller keeps asking on a keep-alive connection (a probe never holds a shutdown up)', async () => {
    const server = await startHealthServer('127.0.0.1', 0, async () => ({ up: true, details: {} }));
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const ask = (): Promise<number> =>
      new Promise((resolve) => {
        const request = http.get({ host: '127.0.0.1', port: server.port, path: '/health/ready', agent }, (response) => {
          response.resume();
          response.once('end', () => resolve(response.statusCode ?? 0));
        });
        request.once('error', () => resolve(0));
      });
    expect(await ask()).toBe(200);
    let polling = true;
    const poller = (async () => {
      while (polling) await ask();
    })();
    try {
      // A probe polling on keep-alive never holds the close up.
      await server.close();
    } finally {
      polling = false;
      await poller;
      agent.destroy();
    }
    expect(await ask()).toBe(0);
  });

  it('closes even while a readiness check never answers (a database ping hanging during shutdown)', async () => {
    const server = await startHealthServer('127.0.0.1', 0, () => new Promise(() => undefined));
    const pending = new Promise<number>((resolve) => {
      const request = http.get({ host: '127.0.0.1', port: server.port, path: '/health/ready' }, (response) => resolve(response.statusCode ?? 0));
      request.once('error', () => resolve(0));
    });
    await new Promise((resolve) => setTimeout(resolve, 100));
    // Without cutting the connection this never resolves (the test times out).
    await server.close();
    expect(await pending).toBe(0);
  });
});
