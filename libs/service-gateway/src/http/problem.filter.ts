import { ArgumentsHost, Catch, ExceptionFilter, Inject } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { GATEWAY_OPTIONS, GatewayOptions } from '../gateway.options';
import { sendProblem } from './problem.responder';

/** The one place where errors become HTTP responses; nothing internal leaks out. */
@Catch()
export class ProblemFilter implements ExceptionFilter {
  constructor(@Inject(GATEWAY_OPTIONS) private readonly options: GatewayOptions) {}

  catch(error: unknown, host: ArgumentsHost): void {
    const http = host.switchToHttp();
    sendProblem(error, http.getRequest<FastifyRequest>(), http.getResponse<FastifyReply>(), this.options.logger, problemTypeBase(this.options));
  }
}

export function problemTypeBase(options: Pick<GatewayOptions, 'publicUrl'>): string {
  return `${options.publicUrl.replace(/\/$/, '')}/api/docs/problems`;
}
