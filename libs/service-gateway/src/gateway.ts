import { isUtf8 } from 'node:buffer';
import { randomUUID } from 'node:crypto';
import { LoggerService } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import type { IncomingMessage } from 'node:http';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from '@mission/runtime';
import { GatewayModule } from './gateway.module';
import { GatewayOptions } from './gateway.options';
import { METRICS } from './metrics/metrics.registry';
import type { Registry } from 'prom-client';
import { httpServerMetrics } from '@mission/runtime';
import { API_VERSION, createOpenApiDocument, isOpenApiRoute, serveOpenApi } from './openapi/document';
import { declaredRouteConfig, enforceAccess } from './auth/access';
import { enterRequestContext } from './auth/request-context.hook';
import { TokenVerifier } from './auth/token-verifier';
import { TenantRateLimiter } from './rate-limit/tenant-rate-limiter';
import { DomainError, ErrorCode, jsonBodyRefusal, MAX_RESOURCE_ID_LENGTH } from '@mission/contracts';
import { jsonOf } from '@mission/messaging';
import { problemTypeBase } from './http/problem.filter';
import { clientErrorHandler, HEADERS_TIMEOUT_MS, MAX_HEADER_BYTES, REQUEST_TIMEOUT_MS } from './http/client-error';
import { sendProblem } from './http/problem.responder';
import { closeGrace } from './http/close-grace';
import { MCP_PATH } from './mcp/mcp.endpoint';
import { registerConsole } from './console/console.routes';

/** Bodies above this are refused with 413 before they are parsed (unless the route sets its own limit). */
export const MAX_BODY_BYTES = 1024 * 1024;
/** A refused body up to this size is read and discarded so its client gets the 413 (see the onSend hook). */
const DRAINED_BODY_BYTES = 64 * 1024 * 1024;

const SANE_REQUEST_ID = /^[A-Za-z0-9._:@-]{1,128}$/;

function requestIdOf(request: IncomingMessage): string {
  const supplied = request.headers['x-request-id'];
  return typeof supplied === 'string' && SANE_REQUEST_ID.test(supplied) ? supplied : randomUUID();
}

function nestLogger(logger: Logger): LoggerService {
  return {
    log: (message: unknown) => logger.debug({ nest: true }, String(message)),
    warn: (message: unknown) => logger.warn(String(message)),
    error: (message: unknown, trace?: unknown) => logger.error({ trace }, String(message)),
  };
}

/**
 * The path a request was routed by: its route's pattern (the router matches the decoded path, and
 * the absolute form of a request line too) or, when no route matched, its path decoded the same
 * way. The raw URL would let `/%61pi/…` or `http://host/api/…` past checks the route then skips.
 */
export function routedPath(request: Pick<FastifyRequest, 'url' | 'routeOptions'>): string {
  if (request.routeOptions.url !== undefined) return request.routeOptions.url;
  const raw = (request.url.split('?')[0] ?? '/').replace(/^[a-z][a-z0-9+.-]*:\/\/[^/]*/i, '') || '/';
  try {
    return decodeURIComponent(raw);
  } catch {
    return raw;
  }
}

/** Longest path parameter routed to a handler (which answers a malformed id 404). */
const MAX_PATH_PARAMETER_LENGTH = MAX_RESOURCE_ID_LENGTH;

/** HSTS on every HTTPS response: a year, subdomains included (RFC 6797). */
export const HSTS = 'max-age=31536000; includeSubDomains';

/**
 * HTTPS settings of the gateway's server: HTTP/2 negotiated by ALPN, HTTP/1.1 for clients
 * without it, nothing older than TLS 1.2.
 */
function httpsServerOptions(tls: NonNullable<GatewayOptions['tls']>): Record<string, unknown> {
  return { http2: true, https: { allowHTTP1: true, cert: tls.cert, key: tls.key, minVersion: 'TLSv1.2', maxHeaderSize: MAX_HEADER_BYTES } };
}

/** Builds the gateway (NestJS on Fastify); the caller listens and closes it. */
export async function createGateway(options: GatewayOptions): Promise<NestFastifyApplication> {
  const requestTimeout = options.requestTimeoutMs ?? REQUEST_TIMEOUT_MS;
  // Node looks for requests past their time every connectionsCheckingInterval (30 s by default).
  const connectionsCheckingInterval = Math.min(30_000, Math.max(250, Math.floor(requestTimeout / 4)));
  const adapter = new FastifyAdapter({
    ...(options.tls ? httpsServerOptions(options.tls) : { http: { maxHeaderSize: MAX_HEADER_BYTES, connectionsCheckingInterval } }),
    bodyLimit: MAX_BODY_BYTES,
    genReqId: requestIdOf,
    requestIdHeader: false,
    trustProxy: options.trustProxy ?? false,
    logger: false,
    return503OnClosing: true,
    // Slow senders (a body cut short of its length, headers trickling in) are cut off with a 408
    // problem instead of holding a connection for ever; Node's own header limit stays (16 KiB),
    // and what its parser refuses is answered as problem details too, with Connection: close.
    requestTimeout,
    clientErrorHandler: clientErrorHandler(problemTypeBase(options), requestTimeout, options.tls ? { 'Strict-Transport-Security': HSTS } : {}),
    // Ids are opaque to clients: a long one is as much "not found" as any other malformed id, not a
    // 414 (Fastify's default limit is 100 characters). Request lines stay bounded by Node's header limit.
    routerOptions: { maxParamLength: MAX_PATH_PARAMETER_LENGTH },
    // A URL that is not valid percent-encoding, or an id past the router's limit, is a malformed id
    // too: answered like one, as problem details with the request id, not Fastify's own error body.
    frameworkErrors: (error: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
      void reply.header('X-Request-Id', request.id);
      if (options.tls) void reply.header('Strict-Transport-Security', HSTS);
      const notFound = error.code === 'FST_ERR_BAD_URL' || error.code === 'FST_ERR_MAX_PARAM_LENGTH';
      sendProblem(notFound ? DomainError.notFound('Resource') : error, request, reply, options.logger, problemTypeBase(options));
    },
  });
  const app = await NestFactory.create<NestFastifyApplication>(GatewayModule.forRoot(options), adapter, {
    logger: nestLogger(options.logger),
    abortOnError: false,
    // JSON parsing is ours (below); Nest's parser would replace it.
    bodyParser: false,
  });
  const fastify = app.getHttpAdapter().getInstance();
  // JSON.stringify, except that an immutable reply (a cached final mission, as the bus hands it
  // over) is encoded once and its JSON kept with it. Set before Nest registers the routes.
  fastify.setReplySerializer((payload) => jsonOf(payload));
  // Requests in flight get CLOSE_GRACE_MS to finish once the gateway closes; then their connections are cut.
  const grace = closeGrace(fastify.server, options.logger);
  fastify.addHook('preClose', (done) => {
    grace.startGrace();
    done();
  });
  // The request line and headers within HEADERS_TIMEOUT_MS (Node's default is the whole request timeout).
  if ('headersTimeout' in fastify.server) fastify.server.headersTimeout = Math.min(HEADERS_TIMEOUT_MS, requestTimeout);
  // Every route declares who may call it (`Access`), in its config; a route registered without a
  // declaration stops the gateway from starting. The OpenAPI module registers its document and UI
  // routes itself, without a config: they are public. A route that declares a body limit gets it
  // (document ingestion).
  fastify.addHook('onRoute', (route) => {
    const config = declaredRouteConfig(route, isOpenApiRoute);
    route.config = config;
    if (config.bodyLimit !== undefined) route.bodyLimit = config.bodyLimit;
  });
  const mcpOrigins = new Set([new URL(options.publicUrl).origin, ...(options.mcpAllowedOrigins ?? [])]);
  const typeBase = problemTypeBase(options);
  fastify.addHook('onRequest', async (request, reply) => {
    void reply.header('X-Request-Id', request.id);
    if (options.tls) void reply.header('Strict-Transport-Security', HSTS);
    // DNS rebinding: a browser page may reach /mcp only from an allowed origin (clients that are not
    // browsers send none). Checked first, so a foreign page learns nothing and spends no budget.
    const origin = request.headers.origin;
    if (origin !== undefined && routedPath(request) === MCP_PATH && !mcpOrigins.has(origin)) {
      sendProblem(new DomainError(ErrorCode.Forbidden, `Requests from the origin ${origin} are not allowed`), request, reply, options.logger, typeBase);
      return reply;
    }
  });
  // Access is enforced as soon as a request is routed, before its body is read (see enforceAccess):
  // a malformed, oversized or misrouted request of a tenant counts and carries the RateLimit fields
  // like any other, and one without a valid token is a 401 whatever its body.
  const access = { verifier: app.get(TokenVerifier), rateLimits: app.get(TenantRateLimiter), publicUrl: options.publicUrl };
  fastify.addHook('onRequest', async (request, reply) => {
    try {
      await enforceAccess(request, reply, routedPath(request), access);
    } catch (error) {
      sendProblem(error, request, reply, options.logger, typeBase);
      return reply;
    }
  });
  fastify.addHook('preHandler', enterRequestContext);
  const requests = httpServerMetrics(app.get<Registry>(METRICS));
  fastify.addHook('onResponse', async (request, reply) => {
    // The route template, never the raw URL: ids and query strings would make series unbounded.
    const route = request.routeOptions.url ?? 'unmatched';
    requests.observe({ method: request.method, route, status_code: String(reply.statusCode) }, reply.elapsedTime / 1000);
  });
  // JSON only (anything else is 415), through Fastify's own parser with its prototype-poisoning
  // checks, its failure turned into our error code: Nest would pass it on as an anonymous 400.
  const parseJson = fastify.getDefaultJsonParser('error', 'error');
  fastify.removeAllContentTypeParsers();
  // An empty body declared JSON is no body (routes whose body is optional accept it; the others say
  // what is missing), as many HTTP clients send one with every POST.
  // A body refused for its size before it was read (413) is answered on a connection that stays
  // open while the rest of it arrives and is discarded: closed at once, the client (still
  // uploading) would see a reset instead of the 413. Up to DRAINED_BODY_BYTES, and within the
  // request timeout; a larger declared body still gets the 413 with Connection: close.
  fastify.addHook('onSend', async (request, reply, payload) => {
    if (reply.statusCode !== 413 || request.raw.complete) return payload;
    const declared = Number(request.headers['content-length']);
    if (Number.isNaN(declared) || declared <= DRAINED_BODY_BYTES) reply.removeHeader('connection');
    return payload;
  });
  // Read as bytes and decoded once, whole: as a string it would be decoded chunk by chunk and
  // joined, then copied flat again to parse (a Brain document's content is up to megabytes).
  // Bytes that are not UTF-8 are refused, never decoded into replacement characters and stored.
  fastify.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    if ((body as Buffer).length === 0) return done(null, undefined);
    if (!isUtf8(body as Buffer)) return done(new DomainError(ErrorCode.MalformedJson, 'The body is not valid UTF-8'), undefined);
    // Fastify's own parser answers through the callback (its type allows a promise; it returns none).
    void parseJson(request, (body as Buffer).toString('utf8'), (error, value) => {
      if (error) return done(new DomainError(ErrorCode.MalformedJson, 'The body is not valid JSON'), undefined);
      // Too deep to walk safely, or text PostgreSQL cannot store: refused here, before anything recurses into it.
      const refusal = jsonBodyRefusal(value);
      if (refusal) return done(new DomainError(ErrorCode.ValidationFailed, 'The body cannot be accepted', [refusal]), undefined);
      return done(null, value);
    });
  });
  serveOpenApi(app, createOpenApiDocument(app, { publicUrl: options.publicUrl, issuer: options.issuer, version: API_VERSION }));
  if (options.console) await registerConsole(app, { console: options.console, publicUrl: options.publicUrl, issuer: options.issuer, logger: options.logger });
  await app.init();
  return app;
}
