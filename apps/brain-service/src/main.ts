import './tracing';
import { loadConfig } from '@mission/config';
import { runService } from '@mission/runtime';
import { rewrapDataKeys } from '@mission/persistence';
import { BrainServiceConfigSchema, openBrainDatabase, startBrainService } from '@mission/service-brain';

runService({
  name: 'brain-service',
  needsDatabase: true,
  migrate: async (databaseUrl) => {
    await (await openBrainDatabase(databaseUrl)).destroy();
  },
  rewrapDataKeys: (databaseUrl, keys) => rewrapDataKeys(() => openBrainDatabase(databaseUrl), 'brain', keys),
  start: ({ bus, config, metrics, keys }) =>
    startBrainService({ databaseUrl: config.DATABASE_URL, bus, metrics, keys, indexKeys: loadConfig(BrainServiceConfigSchema).BRAIN_INDEX_KEY }),
});
