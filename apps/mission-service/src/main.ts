import './tracing';
import 'reflect-metadata';
import { contextLogger, runService } from '@mission/runtime';
import { rewrapDataKeys } from '@mission/persistence';
import { openMissionDatabase, startMissionService } from '@mission/service-mission';

runService({
  name: 'mission-service',
  needsDatabase: true,
  migrate: async (databaseUrl) => {
    await (await openMissionDatabase(databaseUrl)).destroy();
  },
  rewrapDataKeys: (databaseUrl, keys) => rewrapDataKeys(() => openMissionDatabase(databaseUrl), 'mission', keys),
  start: ({ bus, logger, config, metrics, keys }) => startMissionService({ databaseUrl: config.DATABASE_URL, bus, metrics, keys, logger: contextLogger(logger) }),
});
