import { z } from 'zod';
import { env, loadConfig } from '@mission/config';
import { IndexSecretSchema } from '@mission/service-brain';
import { WebhookSettingsSchema } from '@mission/service-notification';
import { KeyEncryptionKeySchema, KeyPublishDelaySchema } from '@mission/service-idp';
import { JwksCooldownSchema } from '@mission/service-gateway';
import { BusSettings, KafkaSaslSettings, KafkaTlsSettings, PayloadKeySettings, RedisTlsSettings, ServerTlsSettings } from '@mission/runtime';

const StandaloneConfigSchema = z
  .object({
    PORT: env.port(3000),
    HOST: z.string().default('127.0.0.1'),
    IDP_PORT: env.port(3001),
    /** /metrics and /health with details for the whole process (the public ports answer only up or down). */
    OPS_PORT: env.port(3002),
    PUBLIC_URL: env.url(['http', 'https']).optional(),
    IDP_ISSUER: env.url(['http', 'https']).optional(),
    DATA_DIR: z.string().default('./.data'),
    DATABASE_URL: env.url(['postgres', 'postgresql']).optional(),
    KAFKA_BROKERS: env.hostPorts().optional(),
    BRAIN_INDEX_KEY: IndexSecretSchema.optional(),
    REDIS_URL: env.url(['redis', 'rediss']).optional(),
    GATEWAY_REPLICAS: env.positiveInt(1),
    GATEWAY_REQUEST_TIMEOUT_SECONDS: env.positiveInt(60).pipe(z.number().max(3_600)),
    GATEWAY_JWKS_COOLDOWN_SECONDS: JwksCooldownSchema,
    RATE_LIMITS: z.enum(['on', 'off']).default('on'),
    MCP_ALLOWED_ORIGINS: env.origins().default([]),
    /** The built approvals console (`npx nx run console:build`); dist/console of the repository when unset. */
    CONSOLE_DIR: z.string().min(1).optional(),
    IDP_KEY_ENCRYPTION_KEY: KeyEncryptionKeySchema.optional(),
    IDP_KEY_PUBLISH_DELAY_SECONDS: KeyPublishDelaySchema,
    LOG_LEVEL: env.logLevel(),
    ...PayloadKeySettings,
    ...ServerTlsSettings,
    ...KafkaTlsSettings,
    ...KafkaSaslSettings,
    ...BusSettings,
    ...RedisTlsSettings,
    IDP_TEST_PUBLISHED_KEYS: z.string().optional(),
    WEBHOOK_RETRY_SCHEDULE: WebhookSettingsSchema.WEBHOOK_RETRY_SCHEDULE,
    WEBHOOKS_ALLOW_PRIVATE: WebhookSettingsSchema.WEBHOOKS_ALLOW_PRIVATE,
  })
  .transform((config) => {
    const localHost = config.HOST === '0.0.0.0' || config.HOST === '::' ? '127.0.0.1' : config.HOST;
    // With a certificate both the gateway and the idp serve HTTPS.
    const scheme = config.TLS_CERT ? 'https' : 'http';
    return {
      ...config,
      PUBLIC_URL: config.PUBLIC_URL ?? `${scheme}://${localHost}:${config.PORT}`,
      IDP_ISSUER: config.IDP_ISSUER ?? `${scheme}://${localHost}:${config.IDP_PORT}`,
    };
  });

export type StandaloneConfig = z.output<typeof StandaloneConfigSchema>;

export function loadStandaloneConfig(environment: NodeJS.ProcessEnv = process.env): StandaloneConfig {
  return loadConfig(StandaloneConfigSchema, environment);
}
