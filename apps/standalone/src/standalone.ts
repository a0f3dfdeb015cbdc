import { consoleUrl } from '@mission/contracts';
import path from 'node:path';
import { createGateway, gatewayOptionsFrom, GatewayReadiness, TenantEventFeed } from '@mission/service-gateway';
import { hitServiceDefinition } from '@mission/service-hit';
import { notificationServiceDefinition } from '@mission/service-notification';
import { parseTestPublishedKeys, resolveAdminCredentials, resolveKeyEncryptionKey, startIdp } from '@mission/service-idp';
import { InProcessBroker, InProcessBus, MessageBus } from '@mission/messaging';
import { brainServiceDefinition } from '@mission/service-brain';
import { missionServiceDefinition } from '@mission/service-mission';
import { EmbeddedPostgresHandle, startEmbeddedPostgres } from '@mission/persistence';
import {
  assertHttpsIssuer,
  busMetrics,
  contextLogger,
  createMetricsRegistry,
  Logger,
  PayloadKeys,
  platformKafkaBus,
  redisTlsCa,
  resolvePayloadKeys,
  serverTls,
  type ServiceDefinition,
  type ServiceHandle,
  startHealthServer,
  stopStep,
} from '@mission/runtime';
import type { Registry } from 'prom-client';
import { StandaloneConfig } from './standalone.config';

export interface StandaloneHandle {
  readonly gatewayUrl: string;
  /** /metrics and /health with details (plain HTTP, on HOST). */
  readonly opsUrl: string;
  readonly issuer: string;
  readonly dataDir: string;
  stop(): Promise<void>;
}

/** In-process messages never leave the process and stay plain; on Kafka they are sealed like every other process's. */
async function createBus(config: StandaloneConfig, logger: Logger, metrics: Registry, payloadKeys: PayloadKeys): Promise<MessageBus> {
  if (!config.KAFKA_BROKERS) {
    return new InProcessBus(new InProcessBroker(), {
      logger: contextLogger(logger.child({ component: 'bus' })),
      metrics: busMetrics(metrics),
      maxInFlight: config.BUS_MAX_IN_FLIGHT,
    });
  }
  return platformKafkaBus({ config: { ...config, KAFKA_BROKERS: config.KAFKA_BROKERS }, clientId: 'standalone', payloadKeys, logger, metrics });
}

/** The back-end services, as each one's own process runs them (runService), in the order they start. */
const SERVICES: readonly ServiceDefinition[] = [missionServiceDefinition, brainServiceDefinition, hitServiceDefinition, notificationServiceDefinition];

/**
 * Every deployable in one process: the identity provider, the three services and the gateway,
 * on embedded PostgreSQL and the in-process bus unless DATABASE_URL / KAFKA_BROKERS say otherwise.
 */
export async function startStandalone(config: StandaloneConfig, logger: Logger): Promise<StandaloneHandle> {
  const dataDir = path.resolve(config.DATA_DIR);
  // Named, so that a stop running past its grace period says which part held it (stopStep).
  const stops: Array<readonly [string, () => Promise<void>]> = [];
  const stopAll = async (): Promise<void> => {
    for (const [name, stop] of stops.reverse())
      await stopStep(logger, name, stop).catch((error: unknown) => logger.error({ err: error, step: name }, 'Stopping a component failed'));
  };

  try {
    let databaseUrl = config.DATABASE_URL;
    if (!databaseUrl) {
      const postgres: EmbeddedPostgresHandle = await startEmbeddedPostgres(dataDir, (message) => logger.warn(message));
      stops.push(['embedded PostgreSQL', () => postgres.stop()]);
      databaseUrl = postgres.url;
      logger.info({ dataDir }, 'Embedded PostgreSQL started');
    }

    // One process, one registry: the operations port's /metrics shows every part.
    const metrics = createMetricsRegistry('mission-service');
    // On Kafka the other processes must open what this one seals: the KEK is then configured, never generated.
    const payloadKeys = await resolvePayloadKeys(config, { generateIn: config.KAFKA_BROKERS ? undefined : dataDir });
    if (payloadKeys.generatedFile)
      logger.info({ file: payloadKeys.generatedFile }, 'Payload key-encryption key generated (mode 0600): keep it, the data encrypted under it needs it');
    const bus = await createBus(config, logger, metrics, payloadKeys);
    const tls = await serverTls(config);
    assertHttpsIssuer(tls, config.IDP_ISSUER);
    const admin = await resolveAdminCredentials({ env: process.env, dataDir, embedded: true });
    // The secret stays in its file (mode 0600): standard output is a log, and logs are read by many.
    if (admin.generated) logger.info({ file: path.join(dataDir, 'admin-client.json'), clientId: admin.clientId }, 'Operator client created; its secret is kept in the file');

    const idp = await startIdp({
      issuer: config.IDP_ISSUER,
      host: config.HOST,
      port: config.IDP_PORT,
      audience: config.PUBLIC_URL,
      console: { url: consoleUrl(config.PUBLIC_URL) },
      databaseUrl,
      bus,
      dataDir,
      adminClient: { clientId: admin.clientId, clientSecret: admin.clientSecret },
      keyEncryptionKey: (await resolveKeyEncryptionKey(config.IDP_KEY_ENCRYPTION_KEY, dataDir)).key,
      tls,
      keyPublishDelayMs: config.IDP_KEY_PUBLISH_DELAY_SECONDS * 1000,
      logger: contextLogger(logger.child({ component: 'idp' })),
      metrics,
      testPublishedKeys: parseTestPublishedKeys(config.IDP_TEST_PUBLISHED_KEYS, process.env.NODE_ENV),
      redisUrl: config.REDIS_URL,
      redisTlsCa: await redisTlsCa(config),
    });
    stops.push(['identity provider', () => idp.stop()]);
    // The three services as their own processes run them (runService): started on the bus, then
    // each one's work after the bus is up, each one's readiness under its name.
    const keys = payloadKeys.provider;
    const services: Array<{ readonly name: string; readonly handle: ServiceHandle }> = [];
    for (const definition of SERVICES) {
      const handle = await definition.start({ bus, logger: logger.child({ component: definition.name }), databaseUrl, metrics, keys, dataDir });
      stops.push([definition.readinessName, () => handle.stop()]);
      services.push({ name: definition.readinessName, handle });
    }

    // The gateway's event streams read the recorded events through a subscription made before the bus starts.
    const events = new TenantEventFeed(bus);
    await bus.start();
    stops.push(['bus', () => bus.close()]);
    for (const { handle } of services) await handle.afterBusStart?.();

    const gateway = await createGateway({
      publicUrl: config.PUBLIC_URL,
      issuer: config.IDP_ISSUER,
      bus,
      events,
      logger: logger.child({ component: 'gateway' }),
      tls,
      ...(await gatewayOptionsFrom(config)),
      metrics,
      readiness: async () => ({
        ...Object.fromEntries(await Promise.all(services.map(async ({ name, handle }) => [name, await handle.ready()] as const))),
        identityProvider: await idp.ready(),
      }),
    });
    await gateway.listen(config.PORT, config.HOST);
    stops.push(['gateway', () => gateway.close()]);
    // One process, one operations port: every part's metrics and the readiness details.
    const readiness = gateway.get(GatewayReadiness);
    const ops = await startHealthServer(config.HOST, config.OPS_PORT, () => readiness.check(), metrics);
    stops.push(['operations port', () => ops.close()]);
    const opsUrl = `http://${config.HOST === '0.0.0.0' || config.HOST === '::' ? '127.0.0.1' : config.HOST}:${ops.port}`;
    return { gatewayUrl: config.PUBLIC_URL, issuer: config.IDP_ISSUER, opsUrl, dataDir, stop: stopAll };
  } catch (error) {
    await stopAll();
    throw error;
  }
}
