/** The window a limit is expressed in: requests per minute. */
export const WINDOW_SECONDS = 60;

const MICROS_PER_WINDOW = WINDOW_SECONDS * 1_000_000;

/** Largest limit whose bucket stays exact in IEEE doubles (Lua's and JavaScript's numbers). */
export const MAX_LIMIT = 100_000_000;

/** What a client is allowed: `limit` requests per minute, under the name clients see (the tier). */
export interface RateLimitPolicy {
  readonly name: string;
  readonly limit: number;
}

/**
 * The token bucket a policy means, in integer units so that both stores compute the same thing
 * exactly. A token is worth `cost` grains; the bucket gains `refill` grains per microsecond and
 * holds at most `capacity` grains. With one token = 60 000 000 grains and refill = L grains/µs,
 * the rate is exactly L tokens per minute with no rounding, whatever L is.
 */
export interface BucketParameters {
  readonly capacity: number;
  readonly cost: number;
  readonly refill: number;
}

/**
 * The bucket of a policy of L per minute: refilled at r = L/60 tokens per second, holding
 * B = ⌈L/6⌉ + 1 tokens (the 2× burst for 10 s, plus the request that starts it).
 * `share` splits the policy between that many independent buckets (the per-replica fallback):
 * each gets L/share per minute and ⌈L/(6·share)⌉ + 1 tokens.
 */
export function bucketFor(policy: RateLimitPolicy, share = 1): BucketParameters {
  const { limit } = policy;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT) throw new RangeError(`A rate limit must be an integer in 1..${MAX_LIMIT}, got ${limit}`);
  if (!Number.isInteger(share) || share < 1) throw new RangeError(`A share must be a positive integer, got ${share}`);
  const burstTokens = Math.floor((limit + 6 * share - 1) / (6 * share));
  const cost = MICROS_PER_WINDOW * share;
  return { capacity: (burstTokens + 1) * cost, cost, refill: limit };
}

/** Capacity in whole tokens (B). */
export function capacityInTokens(bucket: BucketParameters): number {
  return bucket.capacity / bucket.cost;
}
