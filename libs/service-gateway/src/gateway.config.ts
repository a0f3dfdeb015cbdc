import { z } from 'zod';
import { env } from '@mission/config';
import { BusSettings, KafkaSaslSettings, KafkaTlsSettings, PayloadKeySettings, RedisTlsSettings, ServerTlsSettings } from '@mission/runtime';

/**
 * Least seconds between two fetches of the issuer's JWKS for a `kid` the gateway does not hold
 * (a token signed by a key published since the last fetch, or a made-up one): bounds the fetches
 * made-up `kid`s can cause. Deployments that rotate keys with a short publish delay (tests) lower it.
 */
export const JwksCooldownSchema = env.positiveInt(30).pipe(z.number().max(3_600));

/** Environment of the gateway when it runs as its own process. */
export const GatewayConfigSchema = z.object({
  PORT: env.port(3000),
  /** The operations port: /metrics and /health with details, for monitoring only (never the public port). */
  OPS_PORT: env.port(9090),
  HOST: z.string().default('0.0.0.0'),
  PUBLIC_URL: env.url(['http', 'https']),
  IDP_ISSUER: env.url(['http', 'https']),
  IDP_JWKS_URI: env.url(['http', 'https']).optional(),
  KAFKA_BROKERS: env.hostPorts(),
  TRUST_PROXY: z.stringbool().default(false),
  REDIS_URL: env.url(['redis', 'rediss']).optional(),
  GATEWAY_REPLICAS: env.positiveInt(1),
  GATEWAY_REQUEST_TIMEOUT_SECONDS: env.positiveInt(60).pipe(z.number().max(3_600)),
  GATEWAY_JWKS_COOLDOWN_SECONDS: JwksCooldownSchema,
  RATE_LIMITS: z.enum(['on', 'off']).default('on'),
  MCP_ALLOWED_ORIGINS: env.origins().default([]),
  /** The built approvals console (`npx nx run console:build`); dist/console of the repository when unset. */
  CONSOLE_DIR: z.string().min(1).optional(),
  LOG_LEVEL: env.logLevel(),
  ...PayloadKeySettings,
  ...ServerTlsSettings,
  ...KafkaTlsSettings,
  ...KafkaSaslSettings,
  ...BusSettings,
  ...RedisTlsSettings,
});
export type GatewayConfig = z.output<typeof GatewayConfigSchema>;
