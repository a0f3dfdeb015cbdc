import { DynamicModule, Module } from '@nestjs/common';
import { APP_FILTER } from '@nestjs/core';
import { Registry } from 'prom-client';
import { TokenVerifier } from './auth/token-verifier';
import { BUS, GATEWAY_OPTIONS, GatewayOptions } from './gateway.options';
import { HealthController } from './health/health.controller';
import { GatewayReadiness } from './health/readiness';
import { ProblemFilter } from './http/problem.filter';
import { METRICS } from './metrics/metrics.registry';
import { McpController } from './mcp/mcp.controller';
import { McpEndpoint } from './mcp/mcp.endpoint';
import { CATALOGUE_CONTROLLERS } from './operations/catalogue.controllers';
import { OperationRunner } from './operations/operation-runner';
import { TenantRateLimiter } from './rate-limit/tenant-rate-limiter';
import { ProtectedResourceController } from './well-known/protected-resource.controller';
import { EventsController } from './events/events.controller';
import { TenantEventFeed } from './events/tenant-event-feed';

@Module({})
export class GatewayModule {
  static forRoot(options: GatewayOptions): DynamicModule {
    return {
      module: GatewayModule,
      controllers: [
        CATALOGUE_CONTROLLERS.missions,
        CATALOGUE_CONTROLLERS.brain,
        CATALOGUE_CONTROLLERS.hits,
        CATALOGUE_CONTROLLERS.webhooks,
        EventsController,
        McpController,
        CATALOGUE_CONTROLLERS.tenants,
        CATALOGUE_CONTROLLERS.keys,
        ProtectedResourceController,
        HealthController,
      ],
      providers: [
        { provide: GATEWAY_OPTIONS, useValue: options },
        { provide: BUS, useValue: options.bus },
        { provide: TenantEventFeed, useValue: options.events },
        {
          provide: TokenVerifier,
          useFactory: () => new TokenVerifier({ issuer: options.issuer, audience: options.publicUrl, jwksUri: options.jwksUri, jwksCooldownMs: options.jwksCooldownMs }),
        },
        { provide: METRICS, useFactory: () => options.metrics ?? new Registry() },
        TenantRateLimiter,
        GatewayReadiness,
        OperationRunner,
        McpEndpoint,
        { provide: APP_FILTER, useClass: ProblemFilter },
      ],
    };
  }
}
