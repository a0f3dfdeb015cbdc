import { loadConfig } from '@mission/config';
import { runService } from '@mission/runtime';
import { BrainServiceConfigSchema, startBrainService } from '@mission/service-brain';

runService({
  name: 'brain-service',
  needsDatabase: true,
  start: ({ bus, config }) => startBrainService({ databaseUrl: config.DATABASE_URL, bus, indexKeys: loadConfig(BrainServiceConfigSchema).BRAIN_INDEX_KEY }),
});
