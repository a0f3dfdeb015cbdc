import { setTimeout as sleep } from 'node:timers/promises';
import { RateLimitPolicy } from '../policy';
import { RateLimiter } from '../rate-limiter';
import { Taker } from './consequences';

const nowMicros = (): number => performance.now() * 1000;

/**
 * Requests on real time, for a store whose clock is not ours (Redis decides on its own TIME).
 * Offsets count from the answer to the first request, so no request reaches the store earlier
 * than its offset; each record carries the bounds within which the store can have decided it.
 */
export function realTimeTaker(limiter: RateLimiter, key: string, policy: RateLimitPolicy): Taker {
  let first: { sent: number; answered: number } | undefined;
  return {
    take: async (atMicros) => {
      if (first) {
        const wait = first.answered + atMicros - nowMicros();
        if (wait > 1000) await sleep(Math.floor(wait / 1000));
        while (nowMicros() < first.answered + atMicros) await new Promise((resolve) => setImmediate(resolve));
      }
      const sent = nowMicros();
      const decision = await limiter.consume(key, policy);
      const answered = nowMicros();
      if (!first) {
        first = { sent, answered };
        return { decision, earliest: 0, latest: 0 };
      }
      return { decision, earliest: Math.floor(sent - first.answered), latest: Math.ceil(answered - first.sent) };
    },
  };
}
