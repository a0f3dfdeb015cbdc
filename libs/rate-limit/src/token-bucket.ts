import { ceilDiv, floorDiv } from './integer-math';
import { BucketParameters } from './policy';

/** A bucket as stored: its level in grains at `updatedAt` (microseconds of the store's clock). */
export interface BucketState {
  readonly level: number;
  readonly updatedAt: number;
}

/** What one request did to a bucket: admitted or not, and the level it left. */
export interface TakeOutcome {
  readonly allowed: boolean;
  readonly level: number;
}

/**
 * The algorithm, once: refill the bucket up to `now`, then take one token if there is one.
 * A missing bucket is a full one (stores drop buckets once they would have refilled). Time never
 * runs backwards for a bucket: an earlier `now` refills nothing. A refused request changes
 * nothing, so stores need not write it back. The Redis store's script (redis-bucket-store.ts)
 * is this function transcribed line by line; the same test vectors run against both.
 */
export function takeToken(state: BucketState | undefined, now: number, bucket: BucketParameters): { readonly outcome: TakeOutcome; readonly state: BucketState } {
  let level = bucket.capacity;
  let updatedAt = now;
  if (state) {
    updatedAt = Math.max(state.updatedAt, now);
    level = Math.min(bucket.capacity, state.level + (updatedAt - state.updatedAt) * bucket.refill);
  }
  if (level < bucket.cost) return { outcome: { allowed: false, level }, state: { level, updatedAt } };
  level -= bucket.cost;
  return { outcome: { allowed: true, level }, state: { level, updatedAt } };
}

/** Microseconds until a bucket at `level` is full again (after which a store may forget it). */
export function microsUntilFull(level: number, bucket: BucketParameters): number {
  return ceilDiv(bucket.capacity - level, bucket.refill);
}

/** What a client is told about a bucket at `level`, in whole tokens and whole seconds. */
export interface BucketReading {
  /** Whole tokens available now. */
  readonly remaining: number;
  /** Seconds until the bucket is full, or until the next token when it is empty. */
  readonly resetSeconds: number;
  /** Seconds until the next whole token; 0 when one is available now. */
  readonly nextTokenSeconds: number;
}

const MICROS_PER_SECOND = 1_000_000;

export function readBucket(level: number, bucket: BucketParameters): BucketReading {
  const remaining = floorDiv(level, bucket.cost);
  const nextTokenSeconds = remaining > 0 ? 0 : ceilDiv(ceilDiv(bucket.cost - level, bucket.refill), MICROS_PER_SECOND);
  const resetSeconds = remaining > 0 ? ceilDiv(microsUntilFull(level, bucket), MICROS_PER_SECOND) : nextTokenSeconds;
  return { remaining, resetSeconds, nextTokenSeconds };
}
