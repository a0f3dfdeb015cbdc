import http from 'node:http';
import { startHealthServer } from './health-server';

describe('startHealthServer', () => {
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
