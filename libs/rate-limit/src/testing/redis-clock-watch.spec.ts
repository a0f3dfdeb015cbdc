import type { Redis } from 'ioredis';
import { watchRedisClock } from './redis-clock-watch';

/**
 * A Redis whose TIME is this process's clock on the wall, plus `stepMicros` once `stepAfter`
 * samples were taken; `sampled(n)` resolves once TIME was asked `n` times.
 */
function fakeRedis(stepMicros: number, stepAfter: number): { redis: Redis; sampled(count: number): Promise<void> } {
  const wallAtStart = 1_790_000_000_000_000;
  const startedAt = performance.now() * 1000;
  let calls = 0;
  const waiting: Array<{ count: number; resolve: () => void }> = [];
  const redis = {
    time: async () => {
      const at = wallAtStart + (performance.now() * 1000 - startedAt) + (++calls > stepAfter ? stepMicros : 0);
      for (const waiter of waiting.filter(({ count }) => calls >= count)) waiter.resolve();
      return [String(Math.floor(at / 1_000_000)), String(Math.floor(at % 1_000_000))];
    },
  } as unknown as Redis;
  return { redis, sampled: (count) => new Promise<void>((resolve) => waiting.push({ count, resolve })) };
}

async function watchFor(stepMicros: number, stepAfter: number, samples: number) {
  const fake = fakeRedis(stepMicros, stepAfter);
  const watch = watchRedisClock(fake.redis, 1);
  await fake.sampled(samples);
  return watch.stop();
}

describe('watchRedisClock', () => {
  it('sees no movement when both clocks run together', async () => {
    const movement = await watchFor(0, 0, 10);
    expect(movement.samples).toBeGreaterThanOrEqual(10);
    expect(movement.movedMicros).toBeLessThanOrEqual(2);
  });

  it.each([-50_000, 50_000])('sees a step of %i µs of the wall clock', async (step) => {
    const movement = await watchFor(step, 5, 10);
    expect(movement.movedMicros).toBeGreaterThan(Math.abs(step) - 10_000);
    expect(movement.movedMicros).toBeLessThanOrEqual(Math.abs(step) + 2);
  });
});
