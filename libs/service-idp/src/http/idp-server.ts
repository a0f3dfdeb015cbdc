import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';
import { httpServerMetrics } from '@mission/runtime';

export interface Readiness {
  readonly up: boolean;
  readonly details: Record<string, unknown>;
}

export interface IdpServerOptions {
  /** Everything that is not a health check: the OAuth endpoints. */
  readonly handle: (req: http.IncomingMessage, res: http.ServerResponse) => Promise<void>;
  readonly ready: () => Promise<Readiness>;
  readonly onError: (error: unknown) => void;
  /** Every request is observed in its HTTP histogram (the registry is served on the operations port, not here). */
  readonly metrics?: Registry;
  /** HTTPS (TLS 1.2 or later) with this certificate chain and key, PEM; plain HTTP when absent. */
  readonly tls?: { readonly cert: string; readonly key: string };
  /**
   * Strict-Transport-Security on every response: when the issuer is https, whether TLS ends here
   * or at a proxy in front (browsers ignore the header over plain HTTP).
   */
  readonly hsts?: boolean;
}

/** HSTS, as the gateway sends it: a year, subdomains included (RFC 6797). */
export const IDP_HSTS = 'max-age=31536000; includeSubDomains';
/** Time a client has to send a whole request (a slower one is cut off), and its headers. */
const REQUEST_TIMEOUT_MS = 60_000;
const HEADERS_TIMEOUT_MS = 20_000;

const HEALTH_PATHS = new Set(['/health/live', '/health/ready']);

/** The provider's fixed endpoints (oidc-provider's default routes) and ours. */
const FIXED_ROUTES = new Set([
  '/.well-known/openid-configuration',
  '/.well-known/oauth-authorization-server',
  '/jwks',
  '/token',
  '/token/introspection',
  '/token/revocation',
  '/auth',
  '/me',
  '/session/end',
  '/session/end/confirm',
  '/session/end/success',
  '/health/live',
  '/health/ready',
]);

/**
 * The route a path is counted under in the metrics: a fixed endpoint, a template for the ones
 * that carry an id, or `unmatched`; never the raw path (ids would make the series unbounded).
 */
export function idpRoute(path: string): string {
  if (FIXED_ROUTES.has(path)) return path;
  if (/^\/auth\/[^/]+$/.test(path)) return '/auth/:uid';
  if (/^\/interaction\/[^/]+\/login$/.test(path)) return '/interaction/:uid/login';
  if (/^\/interaction\/[^/]+$/.test(path)) return '/interaction/:uid';
  return 'unmatched';
}

function sendJson(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store', ...headers });
  res.end(JSON.stringify(body));
}

/** Health checks are answered here, before the provider, so they never depend on its state. */
export function createIdpServer(options: IdpServerOptions): http.Server {
  const requests = options.metrics ? httpServerMetrics(options.metrics) : undefined;
  const listener: http.RequestListener = (req, res) => {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    if (options.hsts) res.setHeader('strict-transport-security', IDP_HSTS);
    if (requests) {
      const started = process.hrtime.bigint();
      res.once('finish', () => {
        const seconds = Number(process.hrtime.bigint() - started) / 1e9;
        requests.observe({ method: req.method ?? 'GET', route: idpRoute(path), status_code: String(res.statusCode) }, seconds);
      });
    }
    if (HEALTH_PATHS.has(path)) {
      if (req.method !== 'GET' && req.method !== 'HEAD') return sendJson(res, 405, { status: 'method not allowed' }, { allow: 'GET, HEAD' });
      if (path === '/health/live') return sendJson(res, 200, { status: 'up' });
      options
        .ready()
        // Up or down only: which dependency is down is for the operations port (OPS_PORT).
        .then((readiness) => sendJson(res, readiness.up ? 200 : 503, { status: readiness.up ? 'up' : 'down' }))
        .catch((error: unknown) => {
          options.onError(error);
          sendJson(res, 503, { status: 'down' });
        });
      return;
    }
    options.handle(req, res).catch((error: unknown) => {
      options.onError(error);
      if (!res.headersSent) sendJson(res, 500, { error: 'server_error' });
      else res.destroy();
    });
  };
  const limits = { requestTimeout: REQUEST_TIMEOUT_MS, headersTimeout: HEADERS_TIMEOUT_MS, connectionsCheckingInterval: 5_000 };
  if (!options.tls) return http.createServer(limits, listener);
  // An https.Server serves the same API as an http.Server (listen, close, connections).
  return https.createServer({ ...limits, cert: options.tls.cert, key: options.tls.key, minVersion: 'TLSv1.2' }, listener) as unknown as http.Server;
}

export async function listen(server: http.Server, port: number, host: string): Promise<AddressInfo> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return server.address() as AddressInfo;
}

/** Stops accepting connections and lets requests in flight finish, cutting them off after `graceMs`. */
export async function closeServer(server: http.Server, graceMs: number): Promise<void> {
  if (!server.listening) return;
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeIdleConnections();
  const timer = setTimeout(() => server.closeAllConnections(), graceMs);
  try {
    await closed;
  } finally {
    clearTimeout(timer);
  }
}
