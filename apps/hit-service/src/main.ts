import './tracing';
import 'reflect-metadata';
import { contextLogger, runService } from '@mission/runtime';
import { rewrapDataKeys } from '@mission/persistence';
import { openHitDatabase, startHitService } from '@mission/service-hit';

runService({
  name: 'hit-service',
  needsDatabase: true,
  migrate: async (databaseUrl) => {
    await (await openHitDatabase(databaseUrl)).destroy();
  },
  rewrapDataKeys: (databaseUrl, keys) => rewrapDataKeys(() => openHitDatabase(databaseUrl), 'hit', keys),
  start: ({ bus, logger, config, metrics, keys }) => startHitService({ databaseUrl: config.DATABASE_URL, bus, metrics, keys, logger: contextLogger(logger) }),
});
