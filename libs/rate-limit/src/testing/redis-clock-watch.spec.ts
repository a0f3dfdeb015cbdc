import type { Redis } from 'ioredis';
import { watchRedisClock } from './redis-clock-watch';

/** A Redis whose TIME is this process's clock on the wall, plus `stepMicros` once `stepAfter` samples were taken. */
function fakeRedis(stepMicros: number, stepAfter: number): Redis {
  const wallAtStart = 1_790_000_000_000_000;
  const startedAt = performance.now() * 1000;
  let calls = 0;
  return {
    time: async () => {
      const at = wallAtStart + (performance.now() * 1000 - startedAt) + (++calls > stepAfter ? stepMicros : 0);
      return [String(Math.floor(at / 1_000_000)), String(Math.floor(at % 1_000_000))];
    },
  } as unknown as Redis;
}

async function watchFor(redis: Redis, ms: number) {
  const watch = watchRedisClock(redis, 5);
  await new Promise((resolve) => setTimeout(resolve, ms));
  return watch.stop();
}

describe('watchRedisClock', () => {
  it('sees no movement when both clocks run together', async () => {
    const movement = await watchFor(fakeRedis(0, 0), 200);
    expect(movement.samples).toBeGreaterThan(5);
    expect(movement.movedMicros).toBeLessThanOrEqual(2);
  });

  it.each([-50_000, 50_000])('sees a step of %i µs of the wall clock', async (step) => {
    const movement = await watchFor(fakeRedis(step, 5), 200);
    expect(movement.movedMicros).toBeGreaterThan(Math.abs(step) - 1_000);
    expect(movement.movedMicros).toBeLessThanOrEqual(Math.abs(step) + 2);
  });
});
