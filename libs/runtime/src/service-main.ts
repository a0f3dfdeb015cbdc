import { z } from 'zod';
import { ConfigError, env, loadConfig } from '@mission/config';
import type { MessageBus } from '@mission/messaging';
import { startHealthServer } from './health-server';
import { createLogger, Logger } from './logger';
import { createMetricsRegistry } from './metrics';
import type { Registry } from 'prom-client';
import type { KeyProvider } from '@mission/crypto';
import { onShutdownSignal, stopStep } from './shutdown';
import { PayloadKeySettings, resolvePayloadKeys } from './payload-keys';
import { KafkaTlsSettings } from './tls-settings';
import { KafkaSaslSettings } from './kafka-auth';
import { BusSettings, platformKafkaBus } from './platform-bus';

/** Environment of a back-end service running as its own process. */
export const ServiceConfigSchema = z.object({
  HOST: z.string().default('0.0.0.0'),
  HEALTH_PORT: env.port(8080),
  KAFKA_BROKERS: env.hostPorts(),
  DATABASE_URL: env.url(['postgres', 'postgresql']).optional(),
  LOG_LEVEL: env.logLevel(),
  ...PayloadKeySettings,
  ...KafkaTlsSettings,
  ...KafkaSaslSettings,
  ...BusSettings,
});
export type ServiceConfig = z.output<typeof ServiceConfigSchema>;

export interface ServiceHandle {
  afterBusStart?(): Promise<void>;
  ready(): Promise<{ up: boolean; details: Record<string, unknown> }>;
  stop(): Promise<void>;
}

/** What a service is started with, by its own process (runService) or by the all-in-one one. */
export interface ServiceDependencies {
  /** Not started yet: the service registers its handlers; the caller starts the bus, then calls afterBusStart. */
  readonly bus: MessageBus;
  readonly logger: Logger;
  readonly databaseUrl: string;
  readonly metrics: Registry;
  readonly keys: KeyProvider;
  /** The all-in-one process's data directory, where secrets it generates on a first start are kept; absent when the service runs alone. */
  readonly dataDir?: string;
}

/**
 * A back-end service, declared once in its library: how it migrates, re-wraps its data keys and
 * starts. Its own process runs it with runService; `npm start` starts the same definitions in one
 * process. Its readiness is reported under `readinessName`.
 */
export interface ServiceDefinition {
  readonly name: string;
  readonly readinessName: string;
  readonly needsDatabase: boolean;
  /** Brings the service's schema up to date (what `--migrate-only` runs). */
  readonly migrate?: (databaseUrl: string) => Promise<void>;
  /** Re-wraps the schema's data keys under the current KEK (what `--rewrap-data-keys` runs); returns how many. */
  readonly rewrapDataKeys?: (databaseUrl: string, keys: KeyProvider) => Promise<number>;
  start(dependencies: ServiceDependencies): Promise<ServiceHandle>;
}

/**
 * The entry point of a back-end service running as its own process (a container in production):
 * validated config, Kafka, health endpoints for the orchestrator, graceful shutdown that drains
 * in-flight messages before closing the database.
 */
export function runService(definition: ServiceDefinition): void {
  if (process.argv.includes(MIGRATE_ONLY_FLAG)) {
    if (!definition.migrate) throw new Error(`${definition.name} has no database to migrate`);
    runMigrationsOnly(definition.name, definition.migrate);
    return;
  }
  if (process.argv.includes(REWRAP_DATA_KEYS_FLAG)) {
    if (!definition.rewrapDataKeys) throw new Error(`${definition.name} has no data keys`);
    runRewrapDataKeys(definition.name, definition.rewrapDataKeys);
    return;
  }
  const boot = async (): Promise<void> => {
    const config = loadConfig(ServiceConfigSchema);
    if (definition.needsDatabase && !config.DATABASE_URL) throw new ConfigError(['DATABASE_URL: required']);
    const logger = createLogger(definition.name, config.LOG_LEVEL);
    const metrics = createMetricsRegistry(definition.name);
    const payloadKeys = await resolvePayloadKeys(config);
    const bus = await platformKafkaBus({ config, clientId: definition.name, payloadKeys, logger, metrics });
    const handle = await definition.start({ bus, logger, databaseUrl: config.DATABASE_URL ?? '', metrics, keys: payloadKeys.provider });
    await bus.start();
    await handle.afterBusStart?.();
    let draining = false;
    const health = await startHealthServer(
      config.HOST,
      config.HEALTH_PORT,
      async () => {
        const service = await handle.ready();
        const busHealth = bus.health();
        return { up: !draining && service.up && busHealth.up, details: { ...service.details, bus: busHealth, draining } };
      },
      metrics,
    );
    logger.info({ healthPort: health.port }, 'Service started');
    onShutdownSignal(logger, async () => {
      draining = true;
      // A step that takes long says which it is: a stop past its grace period then names its cause.
      await stopStep(logger, 'bus', () => bus.close());
      await stopStep(logger, 'service', () => handle.stop());
      await stopStep(logger, 'health server', () => health.close());
    });
  };
  boot().catch((error: unknown) => {
    process.stderr.write(error instanceof ConfigError ? `${error.message}\n` : `${definition.name} failed to start: ${error instanceof Error ? error.stack : String(error)}\n`);
    process.exit(1);
  });
}

/** `<app> --rewrap-data-keys`: re-wrap the schema's data keys under the current KEK and exit (after a KEK rotation). */
export const REWRAP_DATA_KEYS_FLAG = '--rewrap-data-keys';

const RewrapConfigSchema = z.object({ DATABASE_URL: env.url(['postgres', 'postgresql']), LOG_LEVEL: env.logLevel(), ...PayloadKeySettings });

/**
 * Re-wraps every data key of the service's schema that the current KEK did not wrap (the data is
 * not touched), logs how many, and exits 0; exits 1 with the reason when a key cannot be unwrapped
 * (its KEK is missing from KEK / KEK_PREVIOUS). Safe to run again, and beside running services.
 */
export function runRewrapDataKeys(name: string, rewrap: (databaseUrl: string, keys: KeyProvider) => Promise<number>): void {
  const run = async (): Promise<void> => {
    const config = loadConfig(RewrapConfigSchema);
    const logger = createLogger(name, config.LOG_LEVEL);
    const keys = await resolvePayloadKeys(config);
    const rewrapped = await rewrap(config.DATABASE_URL, keys.provider);
    logger.info({ rewrapped, kekId: keys.provider.currentKekId }, 'Data keys re-wrapped under the current KEK');
  };
  run().then(
    () => process.exit(0),
    (error: unknown) => {
      process.stderr.write(error instanceof ConfigError ? `${error.message}\n` : `${name} re-wrapping failed: ${error instanceof Error ? error.message : String(error)}\n`);
      process.exit(1);
    },
  );
}

/** `<app> --migrate-only`: apply the schema's migrations and exit (a Kubernetes Job before a rollout). */
export const MIGRATE_ONLY_FLAG = '--migrate-only';

const MigrationConfigSchema = z.object({ DATABASE_URL: env.url(['postgres', 'postgresql']), LOG_LEVEL: env.logLevel() });

/**
 * Runs `migrate` against DATABASE_URL and exits 0, or exits 1 with the reason. Services also
 * migrate when they start (under an advisory lock), so a migration Job can run beside a rollout:
 * it surfaces a failing migration as a failed Job, and spares the pods the work.
 */
export function runMigrationsOnly(name: string, migrate: (databaseUrl: string) => Promise<void>): void {
  const run = async (): Promise<void> => {
    const config = loadConfig(MigrationConfigSchema);
    const logger = createLogger(name, config.LOG_LEVEL);
    const started = Date.now();
    await migrate(config.DATABASE_URL);
    logger.info({ ms: Date.now() - started }, 'Migrations applied');
  };
  run().then(
    () => process.exit(0),
    (error: unknown) => {
      process.stderr.write(error instanceof ConfigError ? `${error.message}\n` : `${name} migrations failed: ${error instanceof Error ? error.stack : String(error)}\n`);
      process.exit(1);
    },
  );
}
