import { TIER_RPM } from '@mission/contracts';
import { ManualClock } from './clock';
import { rateLimitHeaders } from './decision';
import { MemoryBucketStore } from './memory-bucket-store';
import { bucketFor, capacityInTokens, RateLimitPolicy } from './policy';
import { MemoryRateLimiter } from './rate-limiter';
import { burstyOffsets, run, steadyOffsets, summarise, trafficFor, windowViolations } from './testing/consequences';
import { manualTaker } from './testing/manual-taker';
import { readBucket, takeToken } from './token-bucket';

const TIERS: RateLimitPolicy[] = [
  { name: 'starter', limit: TIER_RPM.starter },
  { name: 'business', limit: TIER_RPM.business },
  { name: 'professional', limit: TIER_RPM.professional },
  { name: 'enterprise', limit: 7 },
  { name: 'enterprise', limit: 60 },
  { name: 'enterprise', limit: 12_000 },
];

describe('the bucket of a limit L per minute', () => {
  it.each([
    ['starter', 100, 18],
    ['business', 500, 85],
    ['professional', 2000, 335],
    ['enterprise', 1, 2],
    ['enterprise', 60, 11],
  ])('%s (%i/min) holds ⌈L/6⌉ + 1 = %i tokens and refills L/60 per second', (name, limit, capacity) => {
    const bucket = bucketFor({ name, limit });
    expect(capacityInTokens(bucket)).toBe(capacity);
    expect((bucket.refill * 1_000_000) / bucket.cost).toBeCloseTo(limit / 60, 12);
  });

  it('splits a limit between replicas: L/n per minute and ⌈L/(6n)⌉ + 1 tokens each', () => {
    const bucket = bucketFor({ name: 'business', limit: 500 }, 3);
    expect(capacityInTokens(bucket)).toBe(29);
    expect((bucket.refill * 60_000_000) / bucket.cost).toBeCloseTo(500 / 3, 9);
  });

  it('refuses limits it cannot compute exactly', () => {
    expect(() => bucketFor({ name: 'x', limit: 0 })).toThrow(RangeError);
    expect(() => bucketFor({ name: 'x', limit: 1.5 })).toThrow(RangeError);
    expect(() => bucketFor({ name: 'x', limit: 100 }, 0)).toThrow(RangeError);
  });
});

describe.each(TIERS)('the token bucket for $name at $limit/min (the four consequences, manual clock)', (policy) => {
  const bucket = bucketFor(policy);
  const capacity = capacityInTokens(bucket);

  it('1. never limits traffic at or below L/min', async () => {
    for (const perMinute of [policy.limit, Math.max(1, Math.floor(policy.limit / 2))]) {
      const records = await run(manualTaker(policy), trafficFor(perMinute, 120));
      expect(summarise(records).refused).toBe(0);
    }
  });

  it('2. from idle, never limits traffic at 2L/min for 10 s (both ends included)', async () => {
    const records = await run(manualTaker(policy), trafficFor(2 * policy.limit, 10));
    expect(records.length).toBeGreaterThanOrEqual(Math.floor(policy.limit / 3) + 1);
    expect(summarise(records).refused).toBe(0);
  });

  it('3. limits 2L/min kept up for 30 s, refusing about half once the bucket is empty', async () => {
    const records = await run(manualTaker(policy), trafficFor(2 * policy.limit, 30));
    const firstRefusal = records.findIndex((record) => !record.decision.allowed);
    expect(firstRefusal).toBeGreaterThan(0);
    // The bucket lasts B tokens plus what refills meanwhile: about 10 s at twice the rate.
    expect(records[firstRefusal]?.earliest).toBeGreaterThanOrEqual(10_000_000);
    const after = summarise(records.slice(firstRefusal));
    expect(Math.abs(after.refused - after.offered / 2)).toBeLessThanOrEqual(1);
    expect(windowViolations(records, policy)).toEqual([]);
  });

  it('4. admits at most B + r·Δ in any interval Δ, whatever the traffic', async () => {
    for (const seed of [1, 2, 3]) {
      const records = await run(manualTaker(policy), burstyOffsets(policy, 60, seed));
      expect(summarise(records).refused).toBeGreaterThan(0);
      expect(windowViolations(records, policy)).toEqual([]);
    }
  });

  it('4. admits exactly B at once from idle and then one token per 60/L s', async () => {
    const taker = manualTaker(policy);
    const burst = await run(taker, new Array<number>(capacity + 1).fill(0));
    expect(burst.map((record) => record.decision.allowed)).toEqual([...new Array<boolean>(capacity).fill(true), false]);
    const interval = Math.ceil(60_000_000 / policy.limit);
    expect((await taker.take(interval - 1)).decision.allowed).toBe(false);
    expect((await taker.take(interval)).decision.allowed).toBe(true);
  });

  it('never asks for a retry before the next token, and a retry after Retry-After succeeds', async () => {
    const taker = manualTaker(policy);
    let at = 0;
    for (let attempt = 0; attempt < 5; attempt++) {
      let refused = (await taker.take(at)).decision;
      while (refused.allowed) refused = (await taker.take(at)).decision;
      expect(refused.retryAfterSeconds).toBeGreaterThanOrEqual(1);
      expect(refused.resetSeconds).toBe(refused.retryAfterSeconds);
      expect(refused.remaining).toBe(0);
      // A refusal changes nothing, so probing one second earlier is harmless: still refused.
      if (refused.retryAfterSeconds > 1) expect((await taker.take(at + (refused.retryAfterSeconds - 1) * 1_000_000)).decision.allowed).toBe(false);
      at += refused.retryAfterSeconds * 1_000_000;
      expect((await taker.take(at)).decision.allowed).toBe(true);
    }
  });
});

describe('Retry-After and the RateLimit reading', () => {
  it('is the smallest whole number of seconds at or after the next token, for any bucket state', () => {
    let seed = 7;
    const random = (): number => {
      seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
      return seed / 2_147_483_648;
    };
    for (let i = 0; i < 5_000; i++) {
      const policy = { name: 'enterprise', limit: 1 + Math.floor(random() * 50_000) };
      const share = 1 + Math.floor(random() * 4);
      const bucket = bucketFor(policy, share);
      const state = { level: Math.floor(random() * bucket.cost), updatedAt: 1_000_000 };
      const { outcome } = takeToken(state, state.updatedAt, bucket);
      expect(outcome.allowed).toBe(false);
      const seconds = readBucket(outcome.level, bucket).nextTokenSeconds;
      expect(seconds).toBeGreaterThanOrEqual(1);
      expect(takeToken(state, state.updatedAt + seconds * 1_000_000, bucket).outcome.allowed).toBe(true);
      if (seconds > 1) expect(takeToken(state, state.updatedAt + (seconds - 1) * 1_000_000, bucket).outcome.allowed).toBe(false);
    }
  });

  it('counts whole tokens left and the seconds until the bucket is full', () => {
    const bucket = bucketFor({ name: 'business', limit: 500 });
    expect(readBucket(bucket.capacity, bucket)).toEqual({ remaining: 85, resetSeconds: 0, nextTokenSeconds: 0 });
    expect(readBucket(bucket.capacity - bucket.cost, bucket)).toEqual({ remaining: 84, resetSeconds: 1, nextTokenSeconds: 0 });
    // Empty: 85 tokens at 500/min take 10.2 s to come back; the next one 0.12 s.
    expect(readBucket(0, bucket)).toEqual({ remaining: 0, resetSeconds: 1, nextTokenSeconds: 1 });
    expect(readBucket(bucket.cost - 1, bucket)).toEqual({ remaining: 0, resetSeconds: 1, nextTokenSeconds: 1 });
    expect(readBucket(bucket.cost, bucket)).toEqual({ remaining: 1, resetSeconds: 11, nextTokenSeconds: 0 });
  });

  it('never lets time running backwards refill a bucket', () => {
    const bucket = bucketFor({ name: 'starter', limit: 100 });
    const { state } = takeToken({ level: 0, updatedAt: 10_000_000 }, 5_000_000, bucket);
    expect(state).toEqual({ level: 0, updatedAt: 10_000_000 });
  });
});

describe('RateLimit headers (draft-ietf-httpapi-ratelimit-headers-11)', () => {
  async function decisions(policy: RateLimitPolicy, count: number) {
    const limiter = new MemoryRateLimiter({ clock: new ManualClock(), sweepIntervalMs: 0 });
    const all = [];
    for (let i = 0; i < count; i++) all.push(await limiter.consume('tenant', policy));
    return all;
  }

  it('names the tier, its limit per minute and the 60 s window, and the tokens left', async () => {
    const [first] = await decisions({ name: 'business', limit: 500 }, 1);
    expect(first && rateLimitHeaders(first)).toEqual({ 'RateLimit-Policy': '"business";q=500;w=60', RateLimit: '"business";r=84;t=1' });
  });

  it('counts down to zero, then tells the seconds until the next token', async () => {
    const all = await decisions({ name: 'enterprise', limit: 1 }, 3);
    expect(all.map((decision) => rateLimitHeaders(decision).RateLimit)).toEqual(['"enterprise";r=1;t=60', '"enterprise";r=0;t=60', '"enterprise";r=0;t=60']);
    expect(all.map((decision) => [decision.allowed, decision.retryAfterSeconds])).toEqual([
      [true, 0],
      [true, 0],
      [false, 60],
    ]);
    expect(rateLimitHeaders(all[0]!)['RateLimit-Policy']).toBe('"enterprise";q=1;w=60');
  });

  it('writes the policy name as a structured-field string', async () => {
    const [first] = await decisions({ name: 'a "b" \\c', limit: 12 }, 1);
    expect(first && rateLimitHeaders(first)['RateLimit-Policy']).toBe('"a \\"b\\" \\\\c";q=12;w=60');
  });
});

describe('the memory store', () => {
  it('keeps one bucket per key', async () => {
    const limiter = new MemoryRateLimiter({ clock: new ManualClock(), sweepIntervalMs: 0 });
    const policy = { name: 'starter', limit: 100 };
    for (let i = 0; i < 18; i++) expect((await limiter.consume('a', policy)).allowed).toBe(true);
    expect((await limiter.consume('a', policy)).allowed).toBe(false);
    expect((await limiter.consume('b', policy)).allowed).toBe(true);
  });

  it('forgets a bucket once it has refilled, which changes nothing', () => {
    const clock = new ManualClock();
    const store = new MemoryBucketStore({ clock, sweepIntervalMs: 0 });
    const bucket = bucketFor({ name: 'starter', limit: 100 });
    for (let i = 0; i < 18; i++) store.take('a', bucket);
    store.take('b', bucket);
    // `b` lacks one token (0.6 s to refill), `a` all 18 (10.8 s).
    clock.advanceSeconds(0.5);
    store.sweep();
    expect(store.size).toBe(2);
    clock.advanceSeconds(0.1);
    store.sweep();
    expect(store.size).toBe(1);
    clock.advanceSeconds(10.1);
    store.sweep();
    expect(store.size).toBe(1);
    clock.advanceSeconds(0.1);
    store.sweep();
    expect(store.size).toBe(0);
    expect(store.take('a', bucket)).toEqual({ allowed: true, level: bucket.capacity - bucket.cost });
    store.close();
  });

  it('refuses without changing the bucket', () => {
    const clock = new ManualClock();
    const store = new MemoryBucketStore({ clock, sweepIntervalMs: 0 });
    const bucket = bucketFor({ name: 'enterprise', limit: 6 });
    expect([store.take('a', bucket), store.take('a', bucket)].every((outcome) => outcome.allowed)).toBe(true);
    for (let i = 0; i < 3; i++) expect(store.take('a', bucket).allowed).toBe(false);
    clock.advanceSeconds(10);
    expect(store.take('a', bucket).allowed).toBe(true);
    store.close();
  });
});

describe('test vectors', () => {
  it('space steady traffic evenly, starting at 0', () => {
    expect(steadyOffsets(100, 3)).toEqual([0, 600_000, 1_200_000]);
  });
});
