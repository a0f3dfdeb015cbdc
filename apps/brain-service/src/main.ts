import { runService } from '@mission/runtime';
import { startBrainService } from '@mission/service-brain';

runService({
  name: 'brain-service',
  needsDatabase: false,
  start: ({ bus }) => startBrainService({ bus }),
});
