import http from 'node:http';

/** How long a request in progress may finish once the server closes. */
const CLOSE_GRACE_MS = 2_000;

export interface Readiness {
  readonly up: boolean;
  readonly details: Record<string, unknown>;
}

/**
 * A tiny HTTP server for a service without an HTTP API of its own: `/health/live` answers while
 * the process runs, `/health/ready` while its dependencies answer and it is not draining, and
 * `/metrics` serves the process's Prometheus registry.
 */
export async function startHealthServer(
  host: string,
  port: number,
  ready: () => Promise<Readiness>,
  metrics?: { readonly contentType: string; metrics(): Promise<string> },
): Promise<{ port: number; close(): Promise<void> }> {
  let closing = false;
  const server = http.createServer((req, res) => {
    // Once closing, every answer ends its connection: pollers on keep-alive never hold the close up.
    if (closing) res.setHeader('connection', 'close');
    const send = (status: number, body: unknown): void => {
      res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
      res.end(JSON.stringify(body));
    };
    if (req.method !== 'GET') return send(405, { status: 'method not allowed' });
    if (req.url === '/health/live') return send(200, { status: 'up' });
    if (req.url === '/health/ready') {
      ready()
        .then((readiness) => send(readiness.up ? 200 : 503, { status: readiness.up ? 'up' : 'down', details: readiness.details }))
        .catch(() => send(503, { status: 'down' }));
      return;
    }
    if (req.url === '/metrics' && metrics) {
      metrics
        .metrics()
        .then((text) => {
          res.writeHead(200, { 'content-type': metrics.contentType, 'cache-control': 'no-store' });
          res.end(text);
        })
        .catch(() => send(500, { status: 'metrics unavailable' }));
      return;
    }
    send(404, { status: 'not found' });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const address = server.address();
  return {
    port: typeof address === 'object' && address ? address.port : port,
    close: () =>
      new Promise((resolve) => {
        closing = true;
        server.close(() => resolve());
        // Probes and scrapes keep connections open between requests: those are closed now, the
        // ones inside a request after its answer, and any left after a moment are cut.
        server.closeIdleConnections();
        setTimeout(() => server.closeAllConnections(), CLOSE_GRACE_MS).unref();
      }),
  };
}
