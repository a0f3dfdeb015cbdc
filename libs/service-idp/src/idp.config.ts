import { z } from 'zod';
import { env } from '@mission/config';
import { BusSettings, KafkaSaslSettings, KafkaTlsSettings, PayloadKeySettings, RedisTlsSettings, ServerTlsSettings } from '@mission/runtime';

/** Base64url of exactly 32 bytes: the AES-256-GCM key that encrypts the signing keys at rest. */
export const KeyEncryptionKeySchema = z
  .string()
  .regex(/^[A-Za-z0-9_-]+$/, 'must be base64url')
  .refine((text) => Buffer.from(text, 'base64url').length === 32, 'must be base64url of 32 bytes');

/** Seconds from a key rotation to the new key's first signature: at least the gateway's JWKS cache age (10 min). */
export const KeyPublishDelaySchema = env.positiveInt(600);

/** Environment of the idp running as its own process. */
export const IdpConfigSchema = z.object({
  PORT: env.port(3001),
  /** The operations port: /metrics and /health with details, for monitoring only (never the public port). */
  OPS_PORT: env.port(9090),
  HOST: z.string().default('0.0.0.0'),
  IDP_ISSUER: env.url(['http', 'https']),
  GATEWAY_AUDIENCE: env.url(['http', 'https']),
  DATABASE_URL: env.url(['postgres', 'postgresql']),
  KAFKA_BROKERS: env.hostPorts(),
  DATA_DIR: z.string().default('./.data'),
  ADMIN_CLIENT_ID: z.string().min(1).max(200),
  ADMIN_CLIENT_SECRET: z.string().min(16, 'must be at least 16 characters'),
  IDP_KEY_ENCRYPTION_KEY: KeyEncryptionKeySchema,
  IDP_KEY_PUBLISH_DELAY_SECONDS: KeyPublishDelaySchema,
  LOG_LEVEL: env.logLevel(),
  /** Behind a proxy: count failed authentications by the caller's address in X-Forwarded-For. */
  TRUST_PROXY: z.stringbool().default(false),
  /** Shares the budgets of failed authentications between idp replicas; in memory without it. */
  REDIS_URL: env.url(['redis', 'rediss']).optional(),
  ...RedisTlsSettings,
  ...PayloadKeySettings,
  ...ServerTlsSettings,
  ...KafkaTlsSettings,
  ...KafkaSaslSettings,
  ...BusSettings,
  /** Test suites only: see parseTestPublishedKeys. */
  IDP_TEST_PUBLISHED_KEYS: z.string().optional(),
});
export type IdpConfig = z.output<typeof IdpConfigSchema>;
