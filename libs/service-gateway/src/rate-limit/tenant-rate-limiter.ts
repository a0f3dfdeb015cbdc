import { Inject, Injectable, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import { Counter, Gauge, Registry } from 'prom-client';
import { Messages, type StorageQuota } from '@mission/contracts';
import { type MessageBus, requestMessage } from '@mission/messaging';
import { createRateLimiter, RateLimitDecision, RateLimiter } from '@mission/rate-limit';
import { contextLogger } from '@mission/runtime';
import { runWithTenant, tenantRedisKey } from '@mission/tenant-context';
import { BUS, GATEWAY_OPTIONS, GatewayOptions } from '../gateway.options';
import { METRICS } from '../metrics/metrics.registry';
import { TenantPolicies } from './tenant-policies';

/** Redis keys of the buckets: `ratelimit:t:<tenantId>`. */
export const RATE_LIMIT_KEY_PREFIX = 'ratelimit';

const POLICY_LOOKUP_TIMEOUT_MS = 5_000;

export interface RateLimitHealth {
  readonly up: true;
  /** `off`, `memory`, `redis`, or `fallback` (Redis unreachable: per-replica memory buckets). */
  readonly mode: string;
  readonly [detail: string]: unknown;
}

/**
 * Each tenant's one budget for `/api` (and `/mcp`): its policy from the identity provider,
 * its bucket in Redis (shared by every replica) or in memory, and the metrics of both.
 */
@Injectable()
export class TenantRateLimiter implements OnModuleInit, OnModuleDestroy {
  readonly enabled: boolean;
  private readonly limiter: RateLimiter;
  private readonly policies: TenantPolicies;
  private readonly decisions: Counter<'decision' | 'store' | 'tier'>;

  constructor(@Inject(GATEWAY_OPTIONS) options: GatewayOptions, @Inject(BUS) bus: MessageBus, @Inject(METRICS) registry: Registry) {
    const settings = options.rateLimits ?? {};
    const logger = options.logger.child({ component: 'rate-limits' });
    this.enabled = settings.enabled ?? true;
    this.decisions = new Counter({
      name: 'rate_limit_decisions_total',
      help: "Tenant requests admitted or refused by the rate limiter, by the tenant's tier and where the decision was made (memory, redis, fallback).",
      // The tier, never the tenant: tenants are unbounded, tiers are four.
      labelNames: ['decision', 'store', 'tier'],
      registers: [registry],
    });
    const outages = new Counter({
      name: 'rate_limit_redis_outages_total',
      help: 'Times Redis became unreachable and the per-replica memory buckets took over.',
      registers: [registry],
    });
    this.limiter = createRateLimiter({
      redisUrl: settings.redisUrl,
      redisTlsCa: settings.redisTlsCa,
      replicas: settings.replicas,
      logger: contextLogger(logger),
      onModeChange: (mode) => {
        if (mode === 'fallback') outages.inc();
      },
    });
    const limiter = this.limiter;
    new Gauge({
      name: 'rate_limit_fallback_active',
      help: '1 while Redis is unreachable and each replica limits from its own memory (limit ÷ replicas).',
      registers: [registry],
      collect() {
        this.set(limiter.status().mode === 'fallback' ? 1 : 0);
      },
    });
    this.policies = new TenantPolicies(
      (id) => requestMessage(bus, Messages.tenantGet, { id }, { timeoutMs: POLICY_LOOKUP_TIMEOUT_MS }),
      ({ tenantId, error, ageMs }) => logger.warn({ tenantId, ageMs: Math.round(ageMs), err: error }, 'Tenant limits could not be refreshed; the last known ones still apply'),
    );
  }

  async onModuleInit(): Promise<void> {
    if (this.enabled) await this.limiter.start();
  }

  async onModuleDestroy(): Promise<void> {
    this.policies.close();
    await this.limiter.close();
  }

  /** The tenant's storage quota in the Brain, as fresh as its limit; null when the tenant does not exist. */
  storageQuotaOf(tenantId: string): Promise<StorageQuota | null> {
    return this.policies.storageOf(tenantId);
  }

  /** Takes one request from the tenant's budget; undefined when the tenant does not exist. */
  async admit(tenantId: string): Promise<RateLimitDecision | undefined> {
    const policy = await this.policies.policyOf(tenantId);
    if (!policy) return undefined;
    const key = runWithTenant({ tenantId }, () => tenantRedisKey(RATE_LIMIT_KEY_PREFIX));
    const decision = await this.limiter.consume(key, policy);
    this.decisions.inc({ decision: decision.allowed ? 'allowed' : 'refused', store: decision.store, tier: policy.name });
    return decision;
  }

  health(): RateLimitHealth {
    if (!this.enabled) return { up: true, mode: 'off' };
    return { up: true, ...this.limiter.status() };
  }
}
