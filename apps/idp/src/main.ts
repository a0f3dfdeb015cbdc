import './tracing';
import { consoleUrl } from '@mission/contracts';
import path from 'node:path';
import { ConfigError, loadConfig } from '@mission/config';
import {
  contextLogger,
  createLogger,
  createMetricsRegistry,
  MIGRATE_ONLY_FLAG,
  onShutdownSignal,
  platformKafkaBus,
  redisTlsCa,
  resolvePayloadKeys,
  runMigrationsOnly,
  serverTls,
  startHealthServer,
} from '@mission/runtime';
import { IdpConfigSchema, openIdentityDatabase, parseTestPublishedKeys, startIdp } from '@mission/service-idp';

/** The idp as its own process (one container): Kafka for provisioning requests, PostgreSQL for identities. */
async function main(): Promise<void> {
  const config = loadConfig(IdpConfigSchema);
  const logger = createLogger('idp', config.LOG_LEVEL);
  const metrics = createMetricsRegistry('idp');
  const bus = await platformKafkaBus({ config, clientId: 'idp', payloadKeys: await resolvePayloadKeys(config), logger, metrics });
  const idp = await startIdp({
    issuer: config.IDP_ISSUER,
    host: config.HOST,
    port: config.PORT,
    audience: config.GATEWAY_AUDIENCE,
    // The gateway serves the console under its public URL, which is this audience.
    console: { url: consoleUrl(config.GATEWAY_AUDIENCE) },
    databaseUrl: config.DATABASE_URL,
    bus,
    dataDir: path.resolve(config.DATA_DIR),
    adminClient: { clientId: config.ADMIN_CLIENT_ID, clientSecret: config.ADMIN_CLIENT_SECRET },
    keyEncryptionKey: config.IDP_KEY_ENCRYPTION_KEY,
    tls: await serverTls(config),
    keyPublishDelayMs: config.IDP_KEY_PUBLISH_DELAY_SECONDS * 1000,
    logger: contextLogger(logger),
    metrics,
    testPublishedKeys: parseTestPublishedKeys(config.IDP_TEST_PUBLISHED_KEYS, process.env.NODE_ENV),
    redisUrl: config.REDIS_URL,
    trustProxy: config.TRUST_PROXY,
    redisTlsCa: await redisTlsCa(config),
  });
  try {
    await bus.start();
  } catch (error) {
    await idp.stop();
    throw error;
  }
  // Metrics and readiness details on a port of their own, which only monitoring may reach.
  const ops = await startHealthServer(config.HOST, config.OPS_PORT, () => idp.ready(), metrics);
  logger.info({ port: config.PORT, opsPort: ops.port }, 'Identity provider listening');
  onShutdownSignal(logger, async () => {
    // The bus first: its handlers write to the database that idp.stop() closes.
    await bus.close();
    await idp.stop();
    await ops.close();
  });
}

if (process.argv.includes(MIGRATE_ONLY_FLAG)) {
  runMigrationsOnly('idp', async (databaseUrl) => {
    await (await openIdentityDatabase(databaseUrl)).destroy();
  });
} else {
  main().catch((error: unknown) => {
    process.stderr.write(error instanceof ConfigError ? `${error.message}\n` : `idp failed to start: ${error instanceof Error ? error.stack : String(error)}\n`);
    process.exit(1);
  });
}
