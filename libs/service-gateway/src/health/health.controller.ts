import { Controller, Get, Header, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { Operation } from '../openapi/operation';
import { GatewayReadiness } from './readiness';

/**
 * Health for load balancers and probes on the public port: up or down, nothing more. Which
 * dependency is down, and the metrics, are served on the operations port (OPS_PORT), which only
 * the monitoring namespace may reach.
 */
@Controller('health')
export class HealthController {
  constructor(private readonly readiness: GatewayReadiness) {}

  @Get('live')
  @Header('Cache-Control', 'no-store')
  @Operation({
    operationId: 'live',
    tag: 'Discovery and operations',
    summary: 'Liveness: the process is up',
    access: 'public',
    success: { status: 200, description: 'Up', schema: 'health', example: { status: 'up' } },
  })
  live(): { status: 'up' } {
    return { status: 'up' };
  }

  @Get('ready')
  @Header('Cache-Control', 'no-store')
  @Operation({
    operationId: 'ready',
    tag: 'Discovery and operations',
    summary: 'Readiness: up when every dependency this process uses answers (503 when one does not); the details are on the operations port',
    access: 'public',
    success: { status: 200, description: 'Ready', schema: 'health', example: { status: 'up' } },
    problems: [503],
  })
  async ready(@Res({ passthrough: true }) reply: FastifyReply): Promise<{ status: 'up' | 'down' }> {
    const { up } = await this.readiness.check();
    void reply.status(up ? 200 : 503);
    return { status: up ? 'up' : 'down' };
  }
}
