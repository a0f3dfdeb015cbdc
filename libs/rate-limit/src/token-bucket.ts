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

/** What a take of up to n tokens did: how many it took (0: refused) and the level it left. */
export interface LeaseOutcome {
  readonly taken: number;
  readonly level: number;
}

/** The bucket refilled up to `now`. A missing bucket is a full one; time never runs backwards for a bucket. */
function refilled(state: BucketState | undefined, now: number, bucket: BucketParameters): BucketState {
  if (!state) return { level: bucket.capacity, updatedAt: now };
  const updatedAt = Math.max(state.updatedAt, now);
  return { level: Math.min(bucket.capacity, state.level + (updatedAt - state.updatedAt) * bucket.refill), updatedAt };
}

/**
 * The algorithm, once: refill the bucket up to `now`, then take as many whole tokens as it holds,
 * up to `wanted` (at least 1). A missing bucket is a full one (stores drop buckets once they would
 * have refilled). Time never runs backwards for a bucket: an earlier `now` refills nothing. A take
 * that gets nothing changes nothing, so stores need not write it back. The Redis store's script
 * (redis-bucket-store.ts) is this function transcribed line by line; the same test vectors run
 * against both.
 */
export function takeTokens(state: BucketState | undefined, now: number, bucket: BucketParameters, wanted: number): { readonly outcome: LeaseOutcome; readonly state: BucketState } {
  const current = refilled(state, now, bucket);
  const taken = Math.min(wanted, Math.floor(current.level / bucket.cost));
  if (taken < 1) return { outcome: { taken: 0, level: current.level }, state: current };
  const level = current.level - taken * bucket.cost;
  return { outcome: { taken, level }, state: { level, updatedAt: current.updatedAt } };
}

/** One request's take: one token, or a refusal. */
export function takeToken(state: BucketState | undefined, now: number, bucket: BucketParameters): { readonly outcome: TakeOutcome; readonly state: BucketState } {
  const { outcome, state: next } = takeTokens(state, now, bucket, 1);
  return { outcome: { allowed: outcome.taken === 1, level: outcome.level }, state: next };
}

/**
 * Tokens taken earlier and not spent, put back: the bucket refilled up to `now`, then `count`
 * tokens added, never beyond its capacity (returned tokens cannot make room the bucket does not have).
 */
export function returnTokens(state: BucketState | undefined, now: number, bucket: BucketParameters, count: number): BucketState {
  const current = refilled(state, now, bucket);
  return { level: Math.min(bucket.capacity, current.level + count * bucket.cost), updatedAt: current.updatedAt };
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
