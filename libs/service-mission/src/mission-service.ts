import type { Registry } from 'prom-client';
import { contextLogger, databaseMetrics, type ServiceDefinition } from '@mission/runtime';
import { DataSource } from 'typeorm';
import { ConsumerGroups, HitEventSchemas, MessageTypes, MissionEventSchemas, Topics } from '@mission/contracts';
import { eventHandlers, MessageBus } from '@mission/messaging';
import type { KeyProvider } from '@mission/crypto';
import {
  Housekeeper,
  openServiceDatabase,
  RecordCipher,
  OutboxRelay,
  pingDatabase,
  schemaMaintenance,
  processedMessagesSweep,
  publishedOutboxSweep,
  serviceRoleName,
} from '@mission/persistence';
import { CreateMissions1763769600000 } from './migrations/1763769600000-create-missions';
import { CreateIdempotencyKeys1763856000000 } from './migrations/1763856000000-create-idempotency-keys';
import { EnableRowLevelSecurity1764547200000 } from './migrations/1764547200000-enable-row-level-security';
import { SweepIdempotencyKeys1764806400000 } from './migrations/1764806400000-sweep-idempotency-keys';
import { SealMissionContent1764892800000 } from './migrations/1764892800000-seal-mission-content';
import { StepChecks1766620800000 } from './migrations/1766620800000-step-checks';
import { ExpectOneRow1767139200000 } from './migrations/1767139200000-expect-one-row';
import { MISSION_SCHEMA, MissionRow } from './missions/mission.entity';
import { MissionRunner, RunnerLogger } from './missions/mission-runner';
import { DEFAULT_RUNNER_TIMINGS, RunnerTimings, StepRequests } from './missions/mission.steps';
import { missionRequestHandlers } from './missions/missions.handlers';
import { expiredIdempotencyKeysSweep, MissionsRepository } from './missions/missions.repository';
import { IDEMPOTENCY_TTL_HOURS, MissionsService } from './missions/missions.service';
import { FinalMissionCache, type FinalMissionCacheOptions } from './missions/final-missions.cache';

export const MISSION_SERVICE_GROUP = ConsumerGroups.missionService;
export const MISSION_RUNNER_GROUP = ConsumerGroups.missionRunner;
export const MISSION_HIT_EVENTS_GROUP = ConsumerGroups.missionHitEvents;
export const MISSION_STEP_RESULTS_GROUP = ConsumerGroups.missionStepResults;
/** How often running missions are checked for an overdue step reply. */
const DUE_CHECK_INTERVAL_MS = 1_000;

export interface MissionServiceOptions {
  readonly databaseUrl: string;
  /** Not started yet: the service registers its handlers, the caller starts the bus. */
  readonly bus: MessageBus;
  readonly logger: RunnerLogger;
  /** Wraps the tenants' data keys: mission content is stored sealed under them. */
  readonly keys: KeyProvider;
  /** Where the service's database pool and outbox backlog are reported (Prometheus), if anywhere. */
  readonly metrics?: Registry;
  /** How long a step waits for its reply and how it retries (tests shorten them). */
  readonly runnerTimings?: Partial<RunnerTimings>;
  /** How often overdue steps are looked for (default 1 s). */
  readonly dueCheckIntervalMs?: number;
  /** Bounds of the in-memory cache of final missions (FINAL_MISSION_CACHE_DEFAULTS; `maxBytes: 0` turns it off). */
  readonly finalMissionCache?: FinalMissionCacheOptions;
}

export interface MissionServiceHandle {
  /** Call once the bus has started: starts the outbox relay and resumes unfinished missions. */
  afterBusStart(): Promise<void>;
  ready(): Promise<{ up: boolean; details: Record<string, unknown> }>;
  stop(): Promise<void>;
}

/** The `mission` schema, migrated by the connecting user, queried as the service role (row-level security applies). */
export function openMissionDatabase(databaseUrl: string): Promise<DataSource> {
  return openServiceDatabase({
    url: databaseUrl,
    schema: MISSION_SCHEMA,
    entities: [MissionRow],
    migrations: [
      CreateMissions1763769600000,
      CreateIdempotencyKeys1763856000000,
      EnableRowLevelSecurity1764547200000,
      SweepIdempotencyKeys1764806400000,
      SealMissionContent1764892800000,
      StepChecks1766620800000,
      ExpectOneRow1767139200000,
    ],
    applicationName: 'mission-service',
    serviceRole: serviceRoleName(MISSION_SCHEMA),
  });
}

export async function startMissionService(options: MissionServiceOptions): Promise<MissionServiceHandle> {
  const dataSource = await openMissionDatabase(options.databaseUrl);
  if (options.metrics) databaseMetrics(options.metrics, MISSION_SCHEMA, dataSource, { outbox: true });
  const cipher = new RecordCipher(MISSION_SCHEMA, options.keys);
  const relay = new OutboxRelay(dataSource, MISSION_SCHEMA, options.bus, {
    cipher,
    onError: (error) => options.logger.error('Outbox relay pass failed; retrying on the next pass', { error: String(error) }),
  });
  const repository = new MissionsRepository(dataSource, cipher);
  const steps = new StepRequests(cipher, { ...DEFAULT_RUNNER_TIMINGS, ...options.runnerTimings });
  const missions = new MissionsService(dataSource, repository, () => relay.kick(), steps, new FinalMissionCache(options.finalMissionCache));
  const runner = new MissionRunner(dataSource, repository, steps, options.logger, () => relay.kick());
  const housekeeper = new Housekeeper(
    dataSource,
    [expiredIdempotencyKeysSweep(IDEMPOTENCY_TTL_HOURS), processedMessagesSweep(MISSION_SCHEMA), publishedOutboxSweep(MISSION_SCHEMA)],
    {
      onSwept: (task, rows) => options.logger.info('Expired rows deleted', { task, rows }),
      onError: (task, error) => options.logger.error('Deleting expired rows failed; retrying on the next pass', { task, error: String(error) }),
    },
  );

  options.bus.serve(Topics.missionRequests, MISSION_SERVICE_GROUP, missionRequestHandlers(missions));
  options.bus.subscribe(
    Topics.missionEvents,
    MISSION_RUNNER_GROUP,
    eventHandlers(MissionEventSchemas, {
      [MessageTypes.missionQueued]: (queued) => (queued.firstStepSent ? runner.markRunning(queued.missionId) : runner.advance(queued.missionId)),
    }),
  );
  options.bus.subscribe(
    Topics.hitEvents,
    MISSION_HIT_EVENTS_GROUP,
    eventHandlers(HitEventSchemas, {
      [MessageTypes.hitDecided]: (decision, message) => runner.onHitDecided(decision, message.id),
      [MessageTypes.hitExpired]: (expiry, message) => runner.onHitExpired(expiry, message.id),
    }),
  );
  options.bus.subscribe(Topics.missionStepResults, MISSION_STEP_RESULTS_GROUP, (message) => runner.onStepResult(message));

  let dueTimer: NodeJS.Timeout | undefined;
  let checking: Promise<unknown> | undefined;
  const checkDue = (): void => {
    // One pass at a time: a pass still running when the next is due makes that one skip.
    checking ??= runner
      .checkDue()
      .catch((error: unknown) => options.logger.error('Checking overdue missions failed; retrying on the next pass', { error: String(error) }))
      .finally(() => (checking = undefined));
  };

  let resuming: Promise<void> = Promise.resolve();
  return {
    afterBusStart: async () => {
      relay.start();
      housekeeper.start();
      dueTimer = setInterval(checkDue, options.dueCheckIntervalMs ?? DUE_CHECK_INTERVAL_MS);
      dueTimer.unref();
      resuming = runner
        .resumeUnfinished()
        .then((count) => {
          if (count > 0) options.logger.info('Resumed unfinished missions', { count });
        })
        .catch((error: unknown) => options.logger.error('Resuming unfinished missions failed; they resume on the next start', { error: String(error) }));
    },
    ready: async () => {
      const database = await pingDatabase(dataSource);
      return { up: database, details: { database: database ? 'up' : 'down', outboxBacklog: database ? await relay.backlog() : null } };
    },
    stop: async () => {
      if (dueTimer) clearInterval(dueTimer);
      await resuming;
      await checking;
      await housekeeper.stop();
      await relay.stop();
      await dataSource.destroy();
    },
  };
}

/** mission-service as its own process runs it and as `npm start` starts it. */
export const missionServiceDefinition: ServiceDefinition = {
  name: 'mission-service',
  readinessName: 'missionService',
  needsDatabase: true,
  ...schemaMaintenance(openMissionDatabase, MISSION_SCHEMA),
  start: ({ bus, logger, databaseUrl, metrics, keys }) => startMissionService({ databaseUrl, bus, metrics, keys, logger: contextLogger(logger) }),
};
