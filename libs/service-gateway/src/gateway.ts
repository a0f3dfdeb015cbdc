import { randomUUID } from 'node:crypto';
import { LoggerService } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import type { IncomingMessage } from 'node:http';
import type { Logger } from '@mission/runtime';
import { GatewayModule } from './gateway.module';
import { GatewayOptions } from './gateway.options';
import { problemTypeBase } from './http/problem.filter';
import { sendProblem } from './http/problem.responder';

/** Bodies above this are refused with 413 before they are parsed. */
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
  });
  const fastify = app.getHttpAdapter().getInstance();
  fastify.addHook('onRequest', async (request, reply) => {
    void reply.header('X-Request-Id', request.id);
  });
  // Body parsing fails before Nest sees the request; answer those in the same format.
  fastify.setErrorHandler((error, request, reply) => sendProblem(error, request, reply, options.logger, problemTypeBase(options)));
  await app.init();
  return app;
}
