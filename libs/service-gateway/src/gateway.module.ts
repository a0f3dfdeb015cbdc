import { DynamicModule, Module } from '@nestjs/common';
import { APP_FILTER, APP_GUARD } from '@nestjs/core';
import { Registry } from 'prom-client';
import { AdminController } from './admin/admin.controller';
import { AdminKeysController } from './admin/admin-keys.controller';
import { AuthGuard, ScopeGuard } from './auth/auth.guard';
import { TokenVerifier } from './auth/token-verifier';
import { BrainController } from './brain/brain.controller';
import { BUS, GATEWAY_OPTIONS, GatewayOptions } from './gateway.options';
import { HealthController } from './health/health.controller';
import { GatewayReadiness } from './health/readiness';
import { HitsController } from './hits/hits.controller';
import { ProblemFilter } from './http/problem.filter';
import { METRICS } from './metrics/metrics.registry';
import { McpController } from './mcp/mcp.controller';
import { McpEndpoint } from './mcp/mcp.endpoint';
import { MissionsController } from './missions/missions.controller';
import { BrainOperations } from './operations/brain.operations';
import { HitOperations } from './operations/hits.operations';
import { MissionOperations } from './operations/missions.operations';
import { RateLimitGuard } from './rate-limit/rate-limit.guard';
import { TenantRateLimiter } from './rate-limit/tenant-rate-limiter';
import { ProtectedResourceController } from './well-known/protected-resource.controller';

@Module({})
export class GatewayModule {
  static forRoot(options: GatewayOptions): DynamicModule {
    return {
      module: GatewayModule,
      controllers: [MissionsController, BrainController, HitsController, McpController, AdminController, AdminKeysController, ProtectedResourceController, HealthController],
      providers: [
        { provide: GATEWAY_OPTIONS, useValue: options },
        { provide: BUS, useValue: options.bus },
        {
          provide: TokenVerifier,
          useFactory: () => new TokenVerifier({ issuer: options.issuer, audience: options.publicUrl, jwksUri: options.jwksUri }),
        },
        { provide: METRICS, useFactory: () => options.metrics ?? new Registry() },
        TenantRateLimiter,
        GatewayReadiness,
        MissionOperations,
        BrainOperations,
        HitOperations,
        McpEndpoint,
        // Guards run in this order: authentication, the tenant's rate limit, then the scopes.
        { provide: APP_GUARD, useClass: AuthGuard },
        { provide: APP_GUARD, useClass: RateLimitGuard },
        { provide: APP_GUARD, useClass: ScopeGuard },
        { provide: APP_FILTER, useClass: ProblemFilter },
      ],
    };
  }
}
