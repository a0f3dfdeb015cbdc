import type { Registry } from 'prom-client';
import { DataSource } from 'typeorm';
import { loadConfig } from '@mission/config';
import { contextLogger, databaseMetrics, type ServiceDefinition } from '@mission/runtime';
import { EmbeddedNotificationConfigSchema, NotificationServiceConfigSchema } from './notification.config';
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
import { hitEventsToLog, missionEventsToLog, notifyRequestHandlers } from './events/event-log.handlers';
import { CreateWebhooks1795651200001 } from './migrations/1795651200001-create-webhooks';
import { DEFAULT_RETRY_SCHEDULE_SECONDS, WebhookDispatcher } from './webhooks/dispatcher';
import { WebhookTargetPolicy } from './webhooks/target-policy';
import { Webhooks } from './webhooks/webhooks';
import { CreateEventLog1795651200000 } from './migrations/1795651200000-create-event-log';

export interface NotificationServiceOptions {
  readonly databaseUrl: string;
  /** Not started yet: the service registers its handlers, the caller starts the bus. */
  readonly bus: MessageBus;
  readonly logger: {
    info(message: string, context?: Record<string, unknown>): void;
    warn(message: string, context?: Record<string, unknown>): void;
    error(message: string, context?: Record<string, unknown>): void;
  };
  /** Wraps the tenants' data keys: events' data is stored sealed under them. */
  readonly keys: KeyProvider;
  readonly metrics?: Registry;
  readonly webhooks?: WebhookSettings;
}

export interface WebhookSettings {
  /** Seconds before each retry of a failed delivery (WEBHOOK_RETRY_SCHEDULE); the contract's default when absent. */
  readonly retryScheduleSeconds?: readonly number[];
  /** WEBHOOKS_ALLOW_PRIVATE: http:// and private, loopback and link-local targets allowed (local development only). */
  readonly allowPrivate?: boolean;
  /** A 2xx must come within this long (10 s). */
  readonly timeoutMs?: number;
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
    migrations: [CreateEventLog1795651200000, CreateWebhooks1795651200001],
    applicationName: 'notification-service',
    serviceRole: serviceRoleName(NOTIFY_SCHEMA),
  });
}

/** Events older than the log keeps, across tenants, through the migration's SECURITY DEFINER function. */
export function expiredEventsSweep(retentionDays = EVENT_RETENTION_DAYS): SweepTask {
  return { name: 'notify.events', run: (dataSource) => deleteInBatches(dataSource, 'SELECT notify.delete_expired_events($1, $2) AS deleted', [retentionDays]) };
}

/** Settled deliveries as old as the events they carried, across tenants, through the migration's SECURITY DEFINER function. */
export function expiredDeliveriesSweep(retentionDays = EVENT_RETENTION_DAYS): SweepTask {
  return { name: 'notify.deliveries', run: (dataSource) => deleteInBatches(dataSource, 'SELECT notify.delete_expired_deliveries($1, $2) AS deleted', [retentionDays]) };
}

/** The tenants' event logs, fed from the services' mission and approval-item events, read a page at a time, announced to the gateways and delivered to the tenants' webhooks. */
export async function startNotificationService(options: NotificationServiceOptions): Promise<NotificationServiceHandle> {
  const dataSource = await openNotificationDatabase(options.databaseUrl);
  if (options.metrics) databaseMetrics(options.metrics, NOTIFY_SCHEMA, dataSource, { outbox: true });
  const cipher = new RecordCipher(NOTIFY_SCHEMA, options.keys);
  const relay = new OutboxRelay(dataSource, NOTIFY_SCHEMA, options.bus, {
    cipher,
    onError: (error) => options.logger.error('Outbox relay pass failed; retrying on the next pass', { error: String(error) }),
  });
  const settings = options.webhooks ?? {};
  const policy = new WebhookTargetPolicy(settings.allowPrivate ?? false);
  const dispatcher = new WebhookDispatcher(
    dataSource,
    cipher,
    policy,
    { retryScheduleSeconds: settings.retryScheduleSeconds ?? DEFAULT_RETRY_SCHEDULE_SECONDS, ...(settings.timeoutMs ? { timeoutMs: settings.timeoutMs } : {}) },
    options.logger,
  );
  const webhooks = new Webhooks(dataSource, cipher, policy, () => dispatcher.kick());
  const log = new EventLog(dataSource, cipher, {
    whileRecording: {
      read: (tenantId, eventType) => webhooks.subscribersRead(tenantId, eventType),
      write: (manager, tenantId, event, rows) => webhooks.enqueue(manager, tenantId, event, rows as Array<{ id: string }>),
    },
    afterCommit: ({ deliveries }) => {
      relay.kick();
      // Without new deliveries there is nothing for the dispatcher to look for (its timer still does).
      if (deliveries > 0) dispatcher.kick();
    },
    onBatchFailed: (error, events) => options.logger.warn('Recording a batch of events failed; recording them one by one', { events, error: String(error) }),
  });
  const housekeeper = new Housekeeper(dataSource, [expiredEventsSweep(), expiredDeliveriesSweep(), publishedOutboxSweep(NOTIFY_SCHEMA)], {
    onSwept: (task, rows) => options.logger.info('Expired rows deleted', { task, rows }),
    onError: (task, error) => options.logger.error('Deleting expired rows failed; retrying on the next pass', { task, error: String(error) }),
  });
  options.bus.serve(Topics.notifyRequests, ConsumerGroups.notificationService, notifyRequestHandlers(log, webhooks));
  options.bus.subscribe(Topics.missionEvents, ConsumerGroups.notificationMissionEvents, missionEventsToLog(log));
  options.bus.subscribe(Topics.hitEvents, ConsumerGroups.notificationHitEvents, hitEventsToLog(log));
  return {
    afterBusStart: async () => {
      relay.start();
      housekeeper.start();
      dispatcher.start();
    },
    ready: async () => {
      const database = await pingDatabase(dataSource);
      return { up: database, details: { database: database ? 'up' : 'down', outboxBacklog: database ? await relay.backlog() : null } };
    },
    stop: async () => {
      await dispatcher.stop();
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
  start: ({ bus, logger, databaseUrl, metrics, keys, dataDir }) => {
    // Its own process checked the whole service schema at start; `npm start` reads the webhook settings here.
    const config = loadConfig(dataDir === undefined ? NotificationServiceConfigSchema : EmbeddedNotificationConfigSchema);
    return startNotificationService({
      databaseUrl,
      bus,
      metrics,
      keys,
      logger: contextLogger(logger),
      webhooks: { retryScheduleSeconds: config.WEBHOOK_RETRY_SCHEDULE, allowPrivate: config.WEBHOOKS_ALLOW_PRIVATE },
    });
  },
};
