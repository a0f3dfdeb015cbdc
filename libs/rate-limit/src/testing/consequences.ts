import { RateLimitDecision } from '../decision';
import { bucketFor, capacityInTokens, RateLimitPolicy, WINDOW_SECONDS } from '../policy';

/**
 * The four consequences of the rate-limit contract (README, "Rate limits") as traffic patterns
 * and checks, run the same way against every store: a manual clock for the memory store, real
 * time for Redis (whose clock cannot be moved).
 */

const MICROS_PER_WINDOW = WINDOW_SECONDS * 1_000_000;

/** One request as the store saw it: bounds of when it was decided, relative to the first request. */
export interface TakeRecord {
  readonly decision: RateLimitDecision;
  readonly earliest: number;
  readonly latest: number;
}

/** Makes requests against one bucket. */
export interface Taker {
  /** One request, `atMicros` after the first one (or later), with the bounds of when it was decided. */
  take(atMicros: number): Promise<TakeRecord>;
}

/** Offsets (µs) of `count` requests at `perMinute` per minute, the first at 0. */
export function steadyOffsets(perMinute: number, count: number): number[] {
  return Array.from({ length: count }, (_, k) => Math.floor((k * MICROS_PER_WINDOW) / perMinute));
}

/** Offsets of traffic at `perMinute` from 0 to `seconds` inclusive. */
export function trafficFor(perMinute: number, seconds: number): number[] {
  return steadyOffsets(perMinute, Math.floor((perMinute * seconds) / WINDOW_SECONDS) + 1);
}

export async function run(taker: Taker, offsets: readonly number[]): Promise<TakeRecord[]> {
  const records: TakeRecord[] = [];
  for (const offset of offsets) records.push(await taker.take(offset));
  return records;
}

/** Deterministic bursty traffic: bursts of up to `2B` requests and pauses, for `seconds`. */
export function burstyOffsets(policy: RateLimitPolicy, seconds: number, seed = 1): number[] {
  const burst = capacityInTokens(bucketFor(policy)) * 2;
  let state = seed;
  const random = (): number => {
    state = (state * 1_103_515_245 + 12_345) % 2_147_483_648;
    return state / 2_147_483_648;
  };
  const offsets: number[] = [];
  let at = 0;
  while (at <= seconds * 1_000_000) {
    const size = 1 + Math.floor(random() * burst);
    const spacing = Math.floor((random() * MICROS_PER_WINDOW) / policy.limit / 2);
    for (let i = 0; i < size && at <= seconds * 1_000_000; i++, at += spacing) offsets.push(at);
    at += Math.floor(random() * 3_000_000);
  }
  return offsets;
}

/**
 * Consequence 4: in any interval of Δ seconds at most B + r·Δ requests are admitted. Checked for
 * every pair of admitted requests with the widest interval the records allow, in integers
 * (scaled by 60 000 000), in one pass. Returns the violations found (none expected).
 */
export function windowViolations(records: readonly TakeRecord[], policy: RateLimitPolicy): string[] {
  const capacity = capacityInTokens(bucketFor(policy));
  const admitted = records.filter((record) => record.decision.allowed);
  const violations: string[] = [];
  let lowest = Number.POSITIVE_INFINITY;
  let lowestAt = 0;
  admitted.forEach((record, j) => {
    const start = j * MICROS_PER_WINDOW - policy.limit * record.earliest;
    if (start < lowest) {
      lowest = start;
      lowestAt = j;
    }
    const end = j * MICROS_PER_WINDOW - policy.limit * record.latest;
    if (end + (1 - capacity) * MICROS_PER_WINDOW > lowest) {
      const first = admitted[lowestAt];
      violations.push(`${j - lowestAt + 1} admitted between ${first?.earliest} µs and ${record.latest} µs`);
    }
  });
  return violations;
}

export interface Summary {
  readonly offered: number;
  readonly admitted: number;
  readonly refused: number;
}

export function summarise(records: readonly TakeRecord[]): Summary {
  const admitted = records.filter((record) => record.decision.allowed).length;
  return { offered: records.length, admitted, refused: records.length - admitted };
}
