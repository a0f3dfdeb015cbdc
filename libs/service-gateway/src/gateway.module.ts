import { DynamicModule, Module } from '@nestjs/common';
import { APP_FILTER, APP_GUARD, APP_INTERCEPTOR } from '@nestjs/core';
import { AdminController } from './admin/admin.controller';
import { AuthGuard } from './auth/auth.guard';
import { TenantContextInterceptor } from './auth/tenant-context.interceptor';
import { TokenVerifier } from './auth/token-verifier';
import { BUS, GATEWAY_OPTIONS, GatewayOptions } from './gateway.options';
import { HealthController } from './health/health.controller';
import { HitsController } from './hits/hits.controller';
import { ProblemFilter } from './http/problem.filter';
import { MissionsController } from './missions/missions.controller';
import { ProtectedResourceController } from './well-known/protected-resource.controller';

@Module({})
export class GatewayModule {
  static forRoot(options: GatewayOptions): DynamicModule {
    return {
      module: GatewayModule,
      controllers: [MissionsController, HitsController, AdminController, ProtectedResourceController, HealthController],
      providers: [
        { provide: GATEWAY_OPTIONS, useValue: options },
        { provide: BUS, useValue: options.bus },
        {
          provide: TokenVerifier,
          useFactory: () => new TokenVerifier({ issuer: options.issuer, audience: options.publicUrl, jwksUri: options.jwksUri }),
        },
        { provide: APP_GUARD, useClass: AuthGuard },
        { provide: APP_INTERCEPTOR, useClass: TenantContextInterceptor },
        { provide: APP_FILTER, useClass: ProblemFilter },
      ],
    };
  }
}
