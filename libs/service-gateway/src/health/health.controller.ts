import { Controller, Get, Header, Inject, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { Public } from '../auth/auth.decorators';
import { Operation } from '../openapi/operation';
import { TokenVerifier } from '../auth/token-verifier';
import { BUS, GATEWAY_OPTIONS, GatewayOptions } from '../gateway.options';
import { TenantRateLimiter } from '../rate-limit/tenant-rate-limiter';
import type { MessageBus } from '@mission/messaging';

@Controller('health')
@Public()
export class HealthController {
  constructor(
    @Inject(BUS) private readonly bus: MessageBus,
    @Inject(GATEWAY_OPTIONS) private readonly options: GatewayOptions,
    private readonly verifier: TokenVerifier,
    private readonly rateLimits: TenantRateLimiter,
  ) {}

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
    summary: 'Readiness: the dependencies this process uses, with details (503 when one is down)',
    access: 'public',
    success: { status: 200, description: 'Ready', schema: 'health' },
    problems: [503],
  })
  async ready(@Res({ passthrough: true }) reply: FastifyReply): Promise<{ status: 'up' | 'down'; details: Record<string, unknown> }> {
    const bus = this.bus.health();
    const identity = await this.verifier.reachable();
    const extra = (await this.options.readiness?.()) ?? {};
    // Rate limits never fail readiness: without Redis they are served per replica, shown here.
    const details: Record<string, { up: boolean }> = { bus, identityProvider: { up: identity }, rateLimits: this.rateLimits.health(), ...extra };
    const up = Object.values(details).every((check) => check.up);
    void reply.status(up ? 200 : 503);
    return { status: up ? 'up' : 'down', details };
  }
}
