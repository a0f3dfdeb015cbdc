import type { Registry } from 'prom-client';
import { DataSource } from 'typeorm';
import { contextLogger, databaseMetrics, type ServiceDefinition } from '@mission/runtime';
import { ConsumerGroups, Topics } from '@mission/contracts';
import { MessageBus } from '@mission/messaging';
import type { KeyProvider } from '@mission/crypto';
import {
  deleteInBatches,
  Housekeeper,
  openServiceDatabase,
  OutboxRelay,
  pingDatabase,
  publishedOutboxSweep,
  RecordCipher,
  schemaMaintenance,
  serviceRoleName,
  type SweepTask,
} from '@mission/persistence';
import { EVENT_RETENTION_DAYS, EventLog, NOTIFY_SCHEMA } from './events/event-log';
import { eventLogRequestHandlers, hitEventsToLog, missionEventsToLog } from './events/event-log.handlers';
import { CreateEventLog1795651200000 } from './migrations/1795651200000-create-event-log';

export interface NotificationServiceOptions {
  readonly databaseUrl: string;
  /** Not started yet: the service registers its handlers, the caller starts the bus. */
  readonly bus: MessageBus;
  readonly logger: { info(message: string, context?: Record<string, unknown>): void; error(message: string, context?: Record<string, unknown>): void };
  /** Wraps the tenants' data keys: events' data is stored sealed under them. */
  readonly keys: KeyProvider;
  readonly metrics?: Registry;
}

export interface NotificationServiceHandle {
  afterBusStart(): Promise<void>;
  ready(): Promise<{ up: boolean; details: Record<string, unknown> }>;
  stop(): Promise<void>;
}

/** The `notify` schema, migrated by the connecting user, queried as the service role (row-level security applies). */
export function openNotificationDatabase(databaseUrl: string): Promise<DataSource> {
  return openServiceDatabase({
    url: databaseUrl,
    schema: NOTIFY_SCHEMA,
    entities: [],
    migrations: [CreateEventLog1795651200000],
    applicationName: 'notification-service',
    serviceRole: serviceRoleName(NOTIFY_SCHEMA),
  });
}

/** Events older than the log keeps, across tenants, through the migration's SECURITY DEFINER function. */
export function expiredEventsSweep(retentionDays = EVENT_RETENTION_DAYS): SweepTask {
  return { name: 'notify.events', run: (dataSource) => deleteInBatches(dataSource, 'SELECT notify.delete_expired_events($1, $2) AS deleted', [retentionDays]) };
}

/** The tenants' event logs, fed from the services' mission and approval-item events, read a page at a time and announced to the gateways. */
export async function startNotificationService(options: NotificationServiceOptions): Promise<NotificationServiceHandle> {
  const dataSource = await openNotificationDatabase(options.databaseUrl);
  if (options.metrics) databaseMetrics(options.metrics, NOTIFY_SCHEMA, dataSource, { outbox: true });
  const cipher = new RecordCipher(NOTIFY_SCHEMA, options.keys);
  const relay = new OutboxRelay(dataSource, NOTIFY_SCHEMA, options.bus, {
    cipher,
    onError: (error) => options.logger.error('Outbox relay pass failed; retrying on the next pass', { error: String(error) }),
  });
  const log = new EventLog(dataSource, cipher, () => relay.kick());
  const housekeeper = new Housekeeper(dataSource, [expiredEventsSweep(), publishedOutboxSweep(NOTIFY_SCHEMA)], {
    onSwept: (task, rows) => options.logger.info('Expired rows deleted', { task, rows }),
    onError: (task, error) => options.logger.error('Deleting expired rows failed; retrying on the next pass', { task, error: String(error) }),
  });
  options.bus.serve(Topics.notifyRequests, ConsumerGroups.notificationService, eventLogRequestHandlers(log));
  options.bus.subscribe(Topics.missionEvents, ConsumerGroups.notificationMissionEvents, missionEventsToLog(log));
  options.bus.subscribe(Topics.hitEvents, ConsumerGroups.notificationHitEvents, hitEventsToLog(log));
  return {
    afterBusStart: async () => {
      relay.start();
      housekeeper.start();
    },
    ready: async () => {
      const database = await pingDatabase(dataSource);
      return { up: database, details: { database: database ? 'up' : 'down', outboxBacklog: database ? await relay.backlog() : null } };
    },
    stop: async () => {
      await housekeeper.stop();
      await relay.stop();
      await dataSource.destroy();
    },
  };
}

/** notification-service as its own process runs it and as `npm start` starts it. */
export const notificationServiceDefinition: ServiceDefinition = {
  name: 'notification-service',
  readinessName: 'notificationService',
  needsDatabase: true,
  ...schemaMaintenance(openNotificationDatabase, NOTIFY_SCHEMA),
  start: ({ bus, logger, databaseUrl, metrics, keys }) => startNotificationService({ databaseUrl, bus, metrics, keys, logger: contextLogger(logger) }),
};
