import type { Registry } from 'prom-client';
import { contextLogger, databaseMetrics, type ServiceDefinition } from '@mission/runtime';
import { DataSource } from 'typeorm';
import { ConsumerGroups, Topics } from '@mission/contracts';
import { MessageBus } from '@mission/messaging';
import type { KeyProvider } from '@mission/crypto';
import {
  Housekeeper,
  openServiceDatabase,
  OutboxRelay,
  RecordCipher,
  pingDatabase,
  schemaMaintenance,
  processedMessagesSweep,
  publishedOutboxSweep,
  serviceRoleName,
} from '@mission/persistence';
import { HitItemRow } from './hits/hit-item.entity';
import { hitRequestHandlers } from './hits/hits.handlers';
import { missionEventHandler } from './hits/mission-events.handler';
import { HitsRepository } from './hits/hits.repository';
import { HIT_SCHEMA, HitsService } from './hits/hits.service';
import { CreateHitItems1763769600000 } from './migrations/1763769600000-create-hit-items';
import { EnableRowLevelSecurity1764547200000 } from './migrations/1764547200000-enable-row-level-security';
import { SealHitContent1764892800000 } from './migrations/1764892800000-seal-hit-content';
import { DeadlinesAndAssignees1796083200000 } from './migrations/1796083200000-deadlines-and-assignees';
import { ExpirySweep } from './hits/expiry-sweep';

export const HIT_SERVICE_GROUP = ConsumerGroups.hitService;
export const HIT_MISSION_EVENTS_GROUP = ConsumerGroups.hitMissionEvents;

export interface HitServiceOptions {
  readonly databaseUrl: string;
  /** Not started yet: the service registers its handlers, the caller starts the bus. */
  readonly bus: MessageBus;
  readonly logger: { info(message: string, context?: Record<string, unknown>): void; error(message: string, context?: Record<string, unknown>): void };
  /** Wraps the tenants' data keys: what people write is stored sealed under them. */
  readonly keys: KeyProvider;
  /** Where the service's database pool and outbox backlog are reported (Prometheus), if anywhere. */
  readonly metrics?: Registry;
  /** Between passes of the deadline sweep (500 ms): how late past its deadline an item expires at most. */
  readonly expiryIntervalMs?: number;
}

export interface HitServiceHandle {
  /** Call once the bus has started: starts the outbox relay. */
  afterBusStart(): Promise<void>;
  ready(): Promise<{ up: boolean; details: Record<string, unknown> }>;
  stop(): Promise<void>;
}

/** Human approval tasks: created for missions' approval steps, listed, decided; decisions become `hit.decided` events. */
/** The `hit` schema, migrated by the connecting user, queried as the service role (row-level security applies). */
export function openHitDatabase(databaseUrl: string): Promise<DataSource> {
  return openServiceDatabase({
    url: databaseUrl,
    schema: HIT_SCHEMA,
    entities: [HitItemRow],
    migrations: [CreateHitItems1763769600000, EnableRowLevelSecurity1764547200000, SealHitContent1764892800000, DeadlinesAndAssignees1796083200000],
    applicationName: 'hit-service',
    serviceRole: serviceRoleName(HIT_SCHEMA),
  });
}

export async function startHitService(options: HitServiceOptions): Promise<HitServiceHandle> {
  const dataSource = await openHitDatabase(options.databaseUrl);
  if (options.metrics) databaseMetrics(options.metrics, HIT_SCHEMA, dataSource, { outbox: true });
  const cipher = new RecordCipher(HIT_SCHEMA, options.keys);
  const relay = new OutboxRelay(dataSource, HIT_SCHEMA, options.bus, {
    cipher,
    onError: (error) => options.logger.error('Outbox relay pass failed; retrying on the next pass', { error: String(error) }),
  });
  const hits = new HitsService(dataSource, new HitsRepository(cipher), () => relay.kick(), cipher);
  const housekeeper = new Housekeeper(dataSource, [processedMessagesSweep(HIT_SCHEMA), publishedOutboxSweep(HIT_SCHEMA)], {
    onSwept: (task, rows) => options.logger.info('Expired rows deleted', { task, rows }),
    onError: (task, error) => options.logger.error('Deleting expired rows failed; retrying on the next pass', { task, error: String(error) }),
  });
  const expiry = new ExpirySweep(hits, {
    intervalMs: options.expiryIntervalMs,
    onError: (error) => options.logger.error('Expiring approval items past their deadline failed; retrying on the next pass', { error: String(error) }),
  });
  options.bus.serve(Topics.hitRequests, HIT_SERVICE_GROUP, hitRequestHandlers(hits));
  options.bus.subscribe(Topics.missionEvents, HIT_MISSION_EVENTS_GROUP, missionEventHandler(hits));

  return {
    afterBusStart: async () => {
      relay.start();
      housekeeper.start();
      expiry.start();
    },
    ready: async () => {
      const database = await pingDatabase(dataSource);
      return { up: database, details: { database: database ? 'up' : 'down', outboxBacklog: database ? await relay.backlog() : null } };
    },
    stop: async () => {
      await expiry.stop();
      await housekeeper.stop();
      await relay.stop();
      await dataSource.destroy();
    },
  };
}

/** hit-service as its own process runs it and as `npm start` starts it. */
export const hitServiceDefinition: ServiceDefinition = {
  name: 'hit-service',
  readinessName: 'hitService',
  needsDatabase: true,
  ...schemaMaintenance(openHitDatabase, HIT_SCHEMA),
  start: ({ bus, logger, databaseUrl, metrics, keys }) => startHitService({ databaseUrl, bus, metrics, keys, logger: contextLogger(logger) }),
};
