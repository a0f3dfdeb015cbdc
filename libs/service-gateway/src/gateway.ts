import { randomUUID } from 'node:crypto';
import { LoggerService } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import type { IncomingMessage } from 'node:http';
import type { Logger } from '@mission/runtime';
import { GatewayModule } from './gateway.module';
import { GatewayOptions } from './gateway.options';
import { METRICS } from './metrics/metrics.registry';
import type { Registry } from 'prom-client';
import { httpServerMetrics } from '@mission/runtime';
import { API_VERSION, createOpenApiDocument, serveOpenApi } from './openapi/document';
import { DomainError, ErrorCode } from '@mission/contracts';

/** Bodies above this are refused with 413 before they are parsed (unless the route sets its own limit). */
export const MAX_BODY_BYTES = 1024 * 1024;

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

/** Builds the gateway (NestJS on Fastify); the caller listens and closes it. */
export async function createGateway(options: GatewayOptions): Promise<NestFastifyApplication> {
  const adapter = new FastifyAdapter({
    bodyLimit: MAX_BODY_BYTES,
    genReqId: requestIdOf,
    requestIdHeader: false,
    trustProxy: options.trustProxy ?? false,
    logger: false,
    return503OnClosing: true,
  });
  const app = await NestFactory.create<NestFastifyApplication>(GatewayModule.forRoot(options), adapter, {
    logger: nestLogger(options.logger),
    abortOnError: false,
    // JSON parsing is ours (below); Nest's parser would replace it.
    bodyParser: false,
  });
  const fastify = app.getHttpAdapter().getInstance();
  // A route that declares `@RouteConfig({ bodyLimit })` gets its own body limit (document ingestion).
  fastify.addHook('onRoute', (route) => {
    const bodyLimit = (route.config as { bodyLimit?: unknown } | undefined)?.bodyLimit;
    if (typeof bodyLimit === 'number') route.bodyLimit = bodyLimit;
  });
  fastify.addHook('onRequest', async (request, reply) => {
    void reply.header('X-Request-Id', request.id);
  });
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
  fastify.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) =>
    parseJson(request, body as string, (error, value) => (error ? done(new DomainError(ErrorCode.MalformedJson, 'The body is not valid JSON'), undefined) : done(null, value))),
  );
  serveOpenApi(app, createOpenApiDocument(app, { publicUrl: options.publicUrl, issuer: options.issuer, version: API_VERSION }));
  await app.init();
  return app;
}
