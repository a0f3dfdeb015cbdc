import { z } from 'zod';
import { env } from '@mission/config';

/** Environment of the idp running as its own process. */
export const IdpConfigSchema = z.object({
  PORT: env.port(3001),
  HOST: z.string().default('0.0.0.0'),
  IDP_ISSUER: env.url(['http', 'https']),
  GATEWAY_AUDIENCE: env.url(['http', 'https']),
  DATABASE_URL: env.url(['postgres', 'postgresql']),
  KAFKA_BROKERS: env.hostPorts(),
  DATA_DIR: z.string().default('./.data'),
  ADMIN_CLIENT_ID: z.string().min(1).max(200),
  ADMIN_CLIENT_SECRET: z.string().min(16, 'must be at least 16 characters'),
  LOG_LEVEL: env.logLevel(),
  /** Test suites only: see parseTestPublishedKeys. */
  IDP_TEST_PUBLISHED_KEYS: z.string().optional(),
});
export type IdpConfig = z.output<typeof IdpConfigSchema>;
