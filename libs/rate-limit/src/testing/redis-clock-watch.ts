import type { Redis } from 'ioredis';

const nowMicros = (): number => performance.now() * 1000;

/** What a watch saw: how far Redis's clock moved against this process's monotonic clock. */
export interface ClockMovement {
  /** Samples taken. */
  readonly samples: number;
  /** The largest movement (µs) the samples prove, either way; 0 when every pair is consistent. */
  readonly movedMicros: number;
}

export interface RedisClockWatch {
  stop(): Promise<ClockMovement>;
}

/**
 * Watches Redis's clock (TIME, the wall clock its scripts decide on) against performance.now()
 * (monotonic) while a real-time test runs. Each sample bounds the offset between the two clocks
 * by its round trip: Redis answered between `sent` and `answered`, so the offset lies in
 * [redis − answered, redis − sent]. Two samples whose intervals are disjoint prove the wall clock
 * was stepped (or slewed hard) in between, which a test of timing on Redis's clock cannot tell
 * from a limiter's mistake: such a run says nothing and is repeated.
 */
export function watchRedisClock(redis: Redis, intervalMs = 50): RedisClockWatch {
  let highestLow = Number.NEGATIVE_INFINITY;
  let lowestHigh = Number.POSITIVE_INFINITY;
  let samples = 0;
  let stopped = false;
  const sample = async (): Promise<void> => {
    const sent = nowMicros();
    const [seconds, micros] = await redis.time();
    const answered = nowMicros();
    const at = Number(seconds) * 1_000_000 + Number(micros);
    highestLow = Math.max(highestLow, at - answered);
    lowestHigh = Math.min(lowestHigh, at - sent);
    samples++;
  };
  // A failed sample ends the loop; stop() reports it.
  const loop = (async () => {
    while (!stopped) {
      await sample();
      await new Promise((resolve) => setTimeout(resolve, intervalMs));
    }
  })();
  loop.catch(() => undefined);
  return {
    stop: async () => {
      stopped = true;
      await loop;
      // One more after the run, so a step in its last moments is seen too.
      await sample();
      return { samples, movedMicros: Math.max(0, Math.round(highestLow - lowestHigh)) };
    },
  };
}
