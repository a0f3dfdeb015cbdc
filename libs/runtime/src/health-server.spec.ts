import http from 'node:http';
import { startHealthServer } from './health-server';

describe('startHealthServer', () => {
  it('closes even while a readiness check never answers (a database ping hanging during shutdown)', async () => {
    let asked!: () => void;
    const readinessAsked = new Promise<void>((resolve) => (asked = resolve));
    const server = await startHealthServer('127.0.0.1', 0, () => {
      asked();
      return new Promise(() => undefined);
    });
    const pending = new Promise<number>((resolve) => {
      const request = http.get({ host: '127.0.0.1', port: server.port, path: '/health/ready' }, (response) => resolve(response.statusCode ?? 0));
      request.once('error', () => resolve(0));
    });
    // The request is in progress (its check hangs) before the close, however slow the machine.
    await readinessAsked;
    // Without cutting the connection this never resolves (the test times out).
    await server.close();
    expect(await pending).toBe(0);
    // The close waits the server's 2 s grace first: room for a slow machine.
  }, 15_000);
});
