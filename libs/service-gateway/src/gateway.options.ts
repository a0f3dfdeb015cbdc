import { redisTlsCa, type Logger } from '@mission/runtime';
import type { MessageBus } from '@mission/messaging';
import type { TenantEventFeed } from './events/tenant-event-feed';
import type { Registry } from 'prom-client';
import path from 'node:path';
import { DEFAULT_CONSOLE_DIR, type ConsoleOptions } from './console/console.routes';

export interface GatewayOptions {
  /** The gateway's public base URL: the OAuth resource identifier and the tokens' audience. */
  readonly publicUrl: string;
  /** The only issuer whose tokens are accepted. */
  readonly issuer: string;
  /** JWKS location; discovered from the issuer's metadata when absent. */
  readonly jwksUri?: string;
  /** Least time between two fetches of the JWKS for a `kid` it does not hold (default 30 s: JwtStrategyOptions). */
  readonly jwksCooldownMs?: number;
  /** Started by the caller. */
  readonly bus: MessageBus;
  /** The tenants' recorded events for `GET /api/events`: made on `bus` before the caller started it. */
  readonly events: TenantEventFeed;
  readonly logger: Logger;
  readonly trustProxy?: boolean;
  /**
   * HTTPS (HTTP/2 with HTTP/1.1 for clients without it, TLS 1.2 or later) with this certificate
   * chain and key, PEM; plain HTTP when absent. With TLS every response carries HSTS.
   */
  readonly tls?: { readonly cert: string; readonly key: string };
  /** Per-tenant rate limits; on, with buckets in this process's memory, when absent. */
  readonly rateLimits?: {
    /** Buckets shared by every replica through this Redis (`redis://`, `rediss://`); unset: this process's memory. */
    readonly redisUrl?: string;
    /** PEM of the certificate authorities a `rediss://` server must chain to; the system's when absent. */
    readonly redisTlsCa?: string;
    /** Gateway replicas sharing the limits: while Redis is unreachable each allows limit ÷ replicas. */
    readonly replicas?: number;
    /** false: no limits and no RateLimit fields (benchmarks). */
    readonly enabled?: boolean;
  };
  /** Browser origins allowed to call `/mcp` besides the public URL's own (DNS-rebinding protection). */
  readonly mcpAllowedOrigins?: readonly string[];
  /** Time a client has to send a whole request, headers and body (default REQUEST_TIMEOUT_MS, 60 s); a slower one gets 408. */
  readonly requestTimeoutMs?: number;
  /** The registry `/metrics` serves (the process's, with its other metrics); a fresh one when absent. */
  readonly metrics?: Registry;
  /** The approvals console at `/console/`, from these built files; not served when absent. */
  readonly console?: ConsoleOptions;
  /** Extra readiness checks of the process the gateway runs in (e.g. the embedded services). */
  readonly readiness?: () => Promise<Record<string, { up: boolean; [detail: string]: unknown }>>;
}

export const GATEWAY_OPTIONS = Symbol('GATEWAY_OPTIONS');
export const BUS = Symbol('BUS');

/** The configuration both the gateway's own process and `npm start` read for the gateway. */
export interface GatewayEnvironment {
  readonly REDIS_URL?: string;
  readonly REDIS_TLS_CA?: string;
  readonly GATEWAY_REPLICAS: number;
  readonly RATE_LIMITS: 'on' | 'off';
  readonly MCP_ALLOWED_ORIGINS: readonly string[];
  readonly GATEWAY_REQUEST_TIMEOUT_SECONDS: number;
  readonly GATEWAY_JWKS_COOLDOWN_SECONDS: number;
  readonly CONSOLE_DIR?: string;
}

/** The options every composition gives the gateway from its configuration (one place, so they cannot drift). */
export async function gatewayOptionsFrom(
  config: GatewayEnvironment,
): Promise<Pick<GatewayOptions, 'rateLimits' | 'mcpAllowedOrigins' | 'requestTimeoutMs' | 'jwksCooldownMs' | 'console'>> {
  return {
    console: { dir: config.CONSOLE_DIR ? path.resolve(config.CONSOLE_DIR) : DEFAULT_CONSOLE_DIR },
    rateLimits: { redisUrl: config.REDIS_URL, redisTlsCa: await redisTlsCa(config), replicas: config.GATEWAY_REPLICAS, enabled: config.RATE_LIMITS === 'on' },
    mcpAllowedOrigins: config.MCP_ALLOWED_ORIGINS,
    requestTimeoutMs: config.GATEWAY_REQUEST_TIMEOUT_SECONDS * 1000,
    jwksCooldownMs: config.GATEWAY_JWKS_COOLDOWN_SECONDS * 1000,
  };
}
