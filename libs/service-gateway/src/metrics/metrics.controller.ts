import { Controller, Get, Header, Inject, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import type { Registry } from 'prom-client';
import { Public } from '../auth/auth.decorators';
import { Operation } from '../openapi/operation';
import { METRICS } from './metrics.registry';

/** Prometheus exposition of the gateway's metrics. */
@Controller('metrics')
@Public()
export class MetricsController {
  constructor(@Inject(METRICS) private readonly registry: Registry) {}

  @Get()
  @Header('Cache-Control', 'no-store')
  @Operation({
    operationId: 'metrics',
    tag: 'Discovery and operations',
    summary: 'Prometheus metrics (text exposition format)',
    access: 'public',
    success: { status: 200, description: 'Metrics', schema: 'text' },
  })
  async metrics(@Res({ passthrough: true }) reply: FastifyReply): Promise<string> {
    void reply.header('Content-Type', this.registry.contentType);
    return this.registry.metrics();
  }
}
