import { runService } from '@mission/runtime';
import { startHitService } from '@mission/service-hit';

runService({
  name: 'hit-service',
  needsDatabase: false,
  start: ({ bus }) => startHitService({ bus }),
});
