import { ManualClock } from '../clock';
import { RateLimitPolicy } from '../policy';
import { MemoryRateLimiter } from '../rate-limiter';
import { Taker } from './consequences';

/** A fresh memory limiter on a manual clock: each request happens exactly at its offset. */
export function manualTaker(policy: RateLimitPolicy): Taker & { readonly clock: ManualClock; readonly limiter: MemoryRateLimiter } {
  const clock = new ManualClock();
  const limiter = new MemoryRateLimiter({ clock, sweepIntervalMs: 0 });
  const start = clock.nowMicros();
  return {
    clock,
    limiter,
    take: async (atMicros) => {
      clock.set(start + atMicros);
      return { decision: await limiter.consume('tenant', policy), earliest: atMicros, latest: atMicros };
    },
  };
}
