import 'reflect-metadata';
import { contextLogger, runService } from '@mission/runtime';
import { startMissionService } from '@mission/service-mission';

runService({
  name: 'mission-service',
  needsDatabase: true,
  start: ({ bus, logger, config }) => startMissionService({ databaseUrl: config.DATABASE_URL, bus, logger: contextLogger(logger) }),
});
