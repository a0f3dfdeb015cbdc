import { Inject, Injectable } from '@nestjs/common';
import type { MessageBus } from '@mission/messaging';
import { TokenVerifier } from '../auth/token-verifier';
import { BUS, GATEWAY_OPTIONS, GatewayOptions } from '../gateway.options';
import { TenantRateLimiter } from '../rate-limit/tenant-rate-limiter';

export interface GatewayReadinessReport {
  readonly up: boolean;
  readonly details: Record<string, { up: boolean }>;
}

/**
 * Whether the gateway can serve: the bus, the identity provider's keys and any extra check of
 * its host. The public port answers only up or down; the details (which dependency, the rate
 * limiter's mode) are for the operations port, with the metrics.
 */
@Injectable()
export class GatewayReadiness {
  constructor(
    @Inject(BUS) private readonly bus: MessageBus,
    @Inject(GATEWAY_OPTIONS) private readonly options: GatewayOptions,
    private readonly verifier: TokenVerifier,
    private readonly rateLimits: TenantRateLimiter,
  ) {}

  async check(): Promise<GatewayReadinessReport> {
    const bus = this.bus.health();
    const identity = await this.verifier.reachable();
    const extra = (await this.options.readiness?.()) ?? {};
    // Rate limits never fail readiness: without Redis they are served per replica, shown here.
    const details: Record<string, { up: boolean }> = { bus, identityProvider: { up: identity }, rateLimits: this.rateLimits.health(), ...extra };
    return { up: Object.values(details).every((check) => check.up), details };
  }
}
