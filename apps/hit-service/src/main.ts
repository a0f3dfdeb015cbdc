import 'reflect-metadata';
import { contextLogger, runService } from '@mission/runtime';
import { startHitService } from '@mission/service-hit';

runService({
  name: 'hit-service',
  needsDatabase: true,
  start: ({ bus, logger, config }) => startHitService({ databaseUrl: config.DATABASE_URL, bus, logger: contextLogger(logger) }),
});
