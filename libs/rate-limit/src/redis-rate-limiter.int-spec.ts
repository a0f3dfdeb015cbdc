import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { TIER_RPM } from '@mission/contracts';
import { bucketFor, BucketParameters, capacityInTokens, MAX_LIMIT, RateLimitPolicy } from './policy';
import { RateLimitDecision } from './decision';
import { RateLimiterLogger, RedisRateLimiter } from './rate-limiter';
import { RedisBucketStore } from './redis-bucket-store';
import { LeaseOutcome, returnSharedTokens, SharedBucketState, takeSharedTokens } from './token-bucket';
import { burstyOffsets, run, summarise, TakeRecord, trafficFor, windowViolations } from './testing/consequences';
import { realTimeTaker } from './testing/real-time-taker';
import { ClockMovement, watchRedisClock } from './testing/redis-clock-watch';
import { OwnRedisServer, startOwnRedisServer } from './testing/redis-server';
import { microsUntilFull } from './token-bucket';

const SHARED_REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

/**
 * How often the consequences run when Redis's clock moves under them, and by how much it may
 * (µs): 1 ms, plus 50 ppm of the run for a Redis on another host, whose clock drifts (about 1.5
 * ms over the 30 s run; the professional burst's slack is 15 ms).
 */
const CLOCK_ATTEMPTS = 3;
const CLOCK_TOLERANCE_MICROS = 1_000 + 50 * 30;

// Enterprise at 50/min rather than a multiple of 6: its burst then has slack for real-time jitter.
const TIERS: RateLimitPolicy[] = [
  { name: 'starter', limit: TIER_RPM.starter },
  { name: 'business', limit: TIER_RPM.business },
  { name: 'professional', limit: TIER_RPM.professional },
  { name: 'enterprise', limit: 50 },
];

function recordingLogger(): RateLimiterLogger & { readonly lines: Array<[string, string]> } {
  const lines: Array<[string, string]> = [];
  return { lines, info: (message) => lines.push(['info', message]), warn: (message) => lines.push(['warn', message]) };
}

async function eventually(condition: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`Condition not met within ${timeoutMs} ms`);
    await sleep(25);
  }
}

/** 40 callers of one bucket, each asking again as soon as it is answered, for a second. */
async function hammer(limiter: RedisRateLimiter, key: string, policy: RateLimitPolicy): Promise<{ decisions: RateLimitDecision[]; elapsedSeconds: number }> {
  const started = performance.now();
  const decisions = (
    await Promise.all(
      Array.from({ length: 40 }, async () => {
        const seen: RateLimitDecision[] = [];
        while (performance.now() - started < 1_000) seen.push(await limiter.consume(key, policy));
        return seen;
      }),
    )
  ).flat();
  return { decisions, elapsedSeconds: (performance.now() - started) / 1000 };
}

function commandCalls(info: string): Record<string, number> {
  return Object.fromEntries([...info.matchAll(/^cmdstat_([a-z|]+):calls=(\d+)/gm)].map((match) => [match[1], Number(match[2])]));
}

describe('rate limits on the shared Redis', () => {
  const prefix = `rate-limit-test:${randomUUID()}`;
  const logger = recordingLogger();
  let limiter: RedisRateLimiter;
  let admin: Redis;

  beforeAll(async () => {
    limiter = new RedisRateLimiter({ url: SHARED_REDIS_URL, replicas: 1, logger });
    await limiter.start();
    expect(limiter.status().mode).toBe('redis');
    admin = new Redis(SHARED_REDIS_URL);
  });

  afterAll(async () => {
    const keys = await admin.keys(`${prefix}:*`);
    if (keys.length > 0) await admin.del(...keys);
    admin.disconnect();
    await limiter?.close();
  });

  /** The four consequences on real time for every tier at once, each vector on its own bucket under `under`. */
  function consequencesForEveryTier(under: string): Promise<Array<Record<string, unknown>>> {
    return Promise.all(
      TIERS.map(async (policy) => {
        const key = (vector: string): string => `${under}:${policy.name}:${vector}`;
        const [steady, burst, sustained, bursty] = await Promise.all([
          run(realTimeTaker(limiter, key('steady'), policy), trafficFor(policy.limit, 15)),
          run(realTimeTaker(limiter, key('burst'), policy), trafficFor(2 * policy.limit, 10)),
          run(realTimeTaker(limiter, key('sustained'), policy), trafficFor(2 * policy.limit, 30)),
          run(realTimeTaker(limiter, key('bursty'), policy), burstyOffsets(policy, 30)),
        ]);
        const all: TakeRecord[] = [...steady, ...burst, ...sustained, ...bursty];
        const firstRefusal = sustained.findIndex((record) => !record.decision.allowed);
        const afterEmpty = summarise(sustained.slice(Math.max(firstRefusal, 0)));
        return {
          policy: `${policy.name} ${policy.limit}/min`,
          stores: [...new Set(all.map((record) => record.decision.store))],
          steadyRefused: summarise(steady).refused,
          burstRefused: summarise(burst).refused,
          sustainedLimitedAfter10s: firstRefusal > 0 && (sustained[firstRefusal]?.latest ?? 0) >= 9_900_000,
          aboutHalfRefusedOnceEmpty: Math.abs(afterEmpty.refused - afterEmpty.offered / 2) <= Math.max(2, afterEmpty.offered * 0.05),
          burstyRefusedSome: summarise(bursty).refused > 0,
          windowViolations: [...windowViolations(sustained, policy), ...windowViolations(bursty, policy)],
        };
      }),
    );
  }

  it(
    'meets the four consequences for every tier, on Redis time',
    async () => {
      let outcomes: Array<Record<string, unknown>> = [];
      let clock: ClockMovement = { samples: 0, movedMicros: 0 };
      // A run during which Redis's wall clock was stepped against ours tests the clock, not the
      // limiter (the 2× burst of professional has 15 ms of slack): it is run again, with new buckets.
      for (let attempt = 1; attempt <= CLOCK_ATTEMPTS; attempt++) {
        const watch = watchRedisClock(admin);
        try {
          outcomes = await consequencesForEveryTier(`${prefix}:attempt-${attempt}`);
        } finally {
          clock = await watch.stop();
        }
        if (clock.movedMicros <= CLOCK_TOLERANCE_MICROS) break;
        process.stderr.write(
          `Redis's clock moved ${clock.movedMicros} µs against the monotonic clock during attempt ${attempt}; running again; its outcomes: ${JSON.stringify(outcomes)}\n`,
        );
      }
      expect(clock.samples).toBeGreaterThan(100);
      expect(clock.movedMicros).toBeLessThanOrEqual(CLOCK_TOLERANCE_MICROS);
      for (const outcome of outcomes) {
        expect(outcome).toEqual({
          policy: outcome.policy,
          stores: ['redis'],
          steadyRefused: 0,
          burstRefused: 0,
          sustainedLimitedAfter10s: true,
          aboutHalfRefusedOnceEmpty: true,
          burstyRefusedSome: true,
          windowViolations: [],
        });
      }
    },
    CLOCK_ATTEMPTS * 45_000,
  );

  it('keeps one budget for a bucket hammered through two replicas taking ahead at once: never beyond B + r·Δ', async () => {
    // Both replicas take ahead.
    const taking = new RedisRateLimiter({ url: SHARED_REDIS_URL, replicas: 1, logger, maxTakeAhead: 1_000 });
    const other = new RedisRateLimiter({ url: SHARED_REDIS_URL, replicas: 1, logger, maxTakeAhead: 1_000 });
    await taking.start();
    await other.start();
    try {
      const policy = { name: 'business', limit: TIER_RPM.business };
      const key = `${prefix}:hammered`;
      const started = performance.now();
      const outcomes = await Promise.all(
        Array.from({ length: 40 }, async (_, worker) => {
          const decisions = [];
          const through = worker % 2 === 0 ? taking : other;
          while (performance.now() - started < 2_000) decisions.push(await through.consume(key, policy));
          return decisions;
        }),
      );
      const elapsedSeconds = (performance.now() - started) / 1000;
      const admitted = outcomes.flat().filter((decision) => decision.allowed).length;
      expect(outcomes.flat().length).toBeGreaterThan(1_000);
      expect(admitted).toBeGreaterThanOrEqual(85);
      expect(admitted).toBeLessThanOrEqual(Math.floor(85 + (policy.limit / 60) * elapsedSeconds));
      const bystander = await limiter.consume(`${prefix}:bystander`, policy);
      expect(bystander).toMatchObject({ allowed: true, remaining: 84 });
    } finally {
      await taking.close();
      await other.close();
    }
  });

  it('takes several tokens in one command and takes back what was not spent, as the algorithm does', async () => {
    const store = new RedisBucketStore(admin);
    const bucket = bucketFor({ name: 'business', limit: TIER_RPM.business });
    const key = `${prefix}:several`;
    // Whole tokens left: a test's few milliseconds refill less than one (8⅓ a second).
    const tokens = (level: number): number => Math.floor(level / bucket.cost);
    expect(await store.take(key, bucket, 10)).toEqual({ taken: 10, level: 75 * bucket.cost });
    const rest = await store.take(key, bucket, () => 100);
    expect(rest.taken).toBeGreaterThanOrEqual(75);
    expect(rest.taken).toBeLessThanOrEqual(76);
    expect(tokens(rest.level)).toBe(0);
    const empty = await store.take(key, bucket, 3);
    expect(empty.taken).toBeLessThanOrEqual(1);
    await store.giveBack(key, bucket, 5);
    const back = await store.take(key, bucket, 100);
    expect(back.taken).toBeGreaterThanOrEqual(5);
    expect(back.taken).toBeLessThanOrEqual(6);
    // Never beyond the capacity: a full bucket given tokens stays full (its key goes).
    const full = `${prefix}:full`;
    await store.take(full, bucket, 1);
    await store.giveBack(full, bucket, 50);
    expect(await admin.exists(full)).toBe(0);
    expect(await store.take(full, bucket, 1000)).toEqual({ taken: 85, level: 0 });
    await expect(store.take(key, bucket, 0)).rejects.toThrow(RangeError);
  });

  it('keeps each bucket only until it would be full again', async () => {
    const policy = { name: 'starter', limit: TIER_RPM.starter };
    const bucket = bucketFor(policy);
    const key = `${prefix}:ttl`;
    for (let i = 0; i < 3; i++) await limiter.consume(key, policy);
    const ttl = await admin.pttl(key);
    const untilFullMs = microsUntilFull(bucket.capacity - 3 * bucket.cost, bucket) / 1000;
    expect(ttl).toBeGreaterThan(untilFullMs - 500);
    expect(ttl).toBeLessThanOrEqual(Math.ceil(untilFullMs) + 1);
    expect(await admin.get(key)).toMatch(/^\d+:\d+$/);
  });

  it('computes what takeSharedTokens and returnSharedTokens compute, the holders’ records included', async () => {
    const store = new RedisBucketStore(admin);
    const bucket = bucketFor({ name: 'business', limit: TIER_RPM.business });
    const key = `${prefix}:holders`;
    const a = { id: 'a', ttlMs: 5_000 };
    const b = { id: 'b', ttlMs: 5_000 };
    let state: SharedBucketState = { holders: new Map() };
    // The same steps on both, within a few milliseconds (8⅓ tokens a second refill less than one).
    const steps: Array<{ holder: typeof a; wanted: number; held: number; spending: number } | { holder: typeof a; giveBack: number }> = [
      { holder: a, wanted: 10, held: 0, spending: 4 },
      { holder: b, wanted: 30, held: 0, spending: 30 },
      { holder: a, wanted: 5, held: 6, spending: 1 },
      { holder: b, wanted: 100, held: 0, spending: 2 },
      { holder: a, wanted: 3, held: 2, spending: 3 },
      { holder: a, giveBack: 2 },
      { holder: b, wanted: 10, held: 40, spending: 10 },
    ];
    const local: unknown[] = [];
    const remote: unknown[] = [];
    for (const step of steps) {
      if ('giveBack' in step) {
        await store.giveBack(key, bucket, step.giveBack, step.holder);
        state = returnSharedTokens(state, performance.now() * 1_000, bucket, step.giveBack, { holder: step.holder.id, held: 0, ttlMicros: 5_000_000 });
        continue;
      }
      const { wanted, held, spending } = step;
      remote.push(tokensOf(await store.take(key, bucket, () => ({ wanted, held, spending }), step.holder), bucket));
      const next = takeSharedTokens(state, performance.now() * 1_000, bucket, wanted, { holder: step.holder.id, held, spending, ttlMicros: 5_000_000 });
      state = next.state;
      local.push(tokensOf(next.outcome, bucket));
    }
    expect(remote).toEqual(local);
    // The records Redis keeps are the ones the function keeps (a's gone after its give-back).
    const records = await admin.hgetall(`${key}:held`);
    expect(Object.fromEntries(Object.entries(records).map(([holder, record]) => [holder, Number(record.split(':')[0])]))).toEqual(
      Object.fromEntries([...state.holders].map(([holder, record]) => [holder, record.held])),
    );
    // The records' hash lives at least as long as its last record, and as long as the bucket.
    const ttl = await admin.pttl(`${key}:held`);
    expect(ttl).toBeGreaterThan(4_000);
    expect(Math.abs(ttl - (await admin.pttl(key)))).toBeLessThanOrEqual(50);
  });

  it('keeps a lapsed record until the next call has refilled under it: the refill it held off does not come back', async () => {
    const store = new RedisBucketStore(admin);
    const bucket = bucketFor({ name: 'business', limit: TIER_RPM.business });
    const key = `${prefix}:held-off`;
    // From a full bucket a holder takes 10 ahead with a 300 ms record: the bucket (75) cannot refill
    // while the record lives, and the holder makes no further call.
    const started = performance.now();
    expect(await store.take(key, bucket, () => ({ wanted: 10, held: 0, spending: 0 }), { id: 'quiet', ttlMs: 300 })).toMatchObject({ taken: 10 });
    await sleep(400);
    // The lapsed record is still there for the next call to refill under.
    expect(await admin.hlen(`${key}:held`)).toBe(1);
    const next = await store.take(key, bucket, 1_000);
    const seconds = (performance.now() - started) / 1000;
    // Only what came after the record lapsed refills: at most r · (elapsed − 0.3 s) on top of 75.
    expect(next.taken).toBeGreaterThanOrEqual(75);
    expect(next.taken).toBeLessThanOrEqual(75 + Math.floor((TIER_RPM.business / 60) * Math.max(0, seconds - 0.3)));
    expect(await admin.exists(`${key}:held`)).toBe(0);
  });

  it('keeps the tokens a stopped replica held out of the bucket until its record lapses, then refills as usual', async () => {
    const store = new RedisBucketStore(admin);
    const bucket = bucketFor({ name: 'business', limit: TIER_RPM.business });
    const key = `${prefix}:lapsed`;
    const ttlMs = 2_000;
    // A holder takes 40 ahead (none spent) and stops without giving them back.
    const took = performance.now();
    expect(await store.take(key, bucket, () => ({ wanted: 40, held: 0, spending: 0 }), { id: 'gone', ttlMs })).toMatchObject({ taken: 40 });
    // While its record lives the bucket refills no further than 45: 300 ms later another takes 45,
    // not the 47.5 the refill would have brought.
    await sleep(300);
    expect(await store.take(key, bucket, 1_000)).toMatchObject({ taken: 45 });
    const emptied = performance.now();
    expect(emptied - took).toBeLessThan(ttlMs);
    expect(await admin.hlen(`${key}:held`)).toBe(1);
    // Once it lapses the bucket goes on refilling from where it was, 8⅓ tokens a second: the 40
    // never come back at once.
    await sleep(ttlMs - (performance.now() - took) + 100);
    const after = await store.take(key, bucket, 1_000);
    const seconds = (performance.now() - emptied) / 1000;
    expect(after.taken).toBeGreaterThanOrEqual(1);
    expect(after.taken).toBeLessThanOrEqual(Math.floor((TIER_RPM.business / 60) * seconds) + 1);
    expect(await admin.exists(`${key}:held`)).toBe(0);
  });
});

function tokensOf(outcome: LeaseOutcome, bucket: BucketParameters): { taken: number; level: number; held?: number } {
  return { ...outcome, level: Math.floor(outcome.level / bucket.cost) };
}

describe('rate limits on a Redis of this test’s own', () => {
  let server: OwnRedisServer;
  const policy = { name: 'business', limit: TIER_RPM.business };
  const started: RedisRateLimiter[] = [];

  async function startLimiter(replicas = 1, logger = recordingLogger(), maxTakeAhead?: number): Promise<RedisRateLimiter> {
    const limiter = new RedisRateLimiter({ url: server.url, replicas, logger, probeIntervalMs: 100, commandTimeoutMs: 200, maxTakeAhead });
    started.push(limiter);
    await limiter.start();
    return limiter;
  }

  beforeEach(async () => {
    server = await startOwnRedisServer();
  });

  afterEach(async () => {
    for (const limiter of started.splice(0)) await limiter.close();
    server.resume();
    await server.kill();
  });

  it('sends one command per request: EVALSHA', async () => {
    const limiter = await startLimiter();
    const admin = new Redis(server.url);
    try {
      await limiter.consume('warm-up', policy);
      await admin.config('RESETSTAT');
      for (let i = 0; i < 200; i++) await limiter.consume(`tenant-${i % 3}`, policy);
      const calls = Object.entries(commandCalls(await admin.info('commandstats'))).filter(([command]) => !command.startsWith('config'));
      // One round trip each; TIME, HGETALL (the holders' records), GET and SET are the script's own calls inside Redis.
      expect(Object.fromEntries(calls)).toEqual({ evalsha: 200, time: 200, hgetall: 200, get: 200, set: 200 });
    } finally {
      admin.disconnect();
    }
  });

  it('with maxTakeAhead, takes ahead when requests come faster than a round trip: far fewer commands than requests, all within the bucket', async () => {
    const limiter = await startLimiter(1, recordingLogger(), 1_000);
    const admin = new Redis(server.url);
    // The largest limit: 40 workers served from memory make far more than 100,000 requests a second.
    const enterprise = { name: 'enterprise', limit: MAX_LIMIT };
    const capacity = capacityInTokens(bucketFor(enterprise));
    try {
      await limiter.consume('warm-up', policy);
      await admin.config('RESETSTAT');
      const { decisions } = await hammer(limiter, 'busy', enterprise);
      const calls = commandCalls(await admin.info('commandstats'));
      expect(decisions.length).toBeGreaterThan(2_000);
      expect(decisions.every((decision) => decision.allowed && decision.store === 'redis')).toBe(true);
      expect(calls.evalsha).toBeLessThan(decisions.length / 3);
      // Never more remaining than the bucket holds (tokens held count as remaining).
      expect(decisions.reduce((most, decision) => Math.max(most, decision.remaining), 0)).toBeLessThanOrEqual(capacity - 1);
    } finally {
      admin.disconnect();
    }
  });

  it.each([
    ['by default (nothing taken ahead)', undefined],
    ['taking ahead', 1_000],
  ])('hammered by 40 callers of one tenant, admits never more than the bucket gives (B + r·Δ), %s', async (_, maxTakeAhead) => {
    const limiter = await startLimiter(1, recordingLogger(), maxTakeAhead);
    const { decisions, elapsedSeconds } = await hammer(limiter, 'dry', policy);
    const admitted = decisions.filter((decision) => decision.allowed).length;
    expect(decisions.every((decision) => decision.store === 'redis')).toBe(true);
    expect(decisions.length - admitted).toBeGreaterThan(0);
    // Business: 85 tokens, 8⅓ a second.
    expect(admitted).toBeGreaterThanOrEqual(85);
    expect(admitted).toBeLessThanOrEqual(85 + Math.floor((TIER_RPM.business / 60) * elapsedSeconds));
  });

  it('loads the script again when Redis has lost it (NOSCRIPT)', async () => {
    const limiter = await startLimiter();
    const admin = new Redis(server.url);
    try {
      expect((await limiter.consume('a', policy)).remaining).toBe(84);
      await admin.script('FLUSH');
      expect(await limiter.consume('a', policy)).toMatchObject({ allowed: true, remaining: 83, store: 'redis' });
    } finally {
      admin.disconnect();
    }
  });

  it('sends the takes of requests that arrive together as one pipeline, each decided on its own, and reloads a lost script there too', async () => {
    const limiter = await startLimiter();
    const admin = new Redis(server.url);
    const pipelines = jest.spyOn(Redis.prototype, 'pipeline');
    try {
      await limiter.consume('warm-up', policy);
      pipelines.mockClear();
      const burst = await Promise.all(Array.from({ length: 50 }, (_, index) => limiter.consume(`burst-${index % 5}`, policy)));
      expect(pipelines).toHaveBeenCalledTimes(1);
      // Each key was taken ten times: its decisions count down 84 … 75, each remaining seen once.
      for (let key = 0; key < 5; key++) {
        const remaining = burst.filter((_, index) => index % 5 === key).map((decision) => decision.remaining);
        expect(remaining.sort((a, b) => b - a)).toEqual([84, 83, 82, 81, 80, 79, 78, 77, 76, 75]);
      }
      await admin.script('FLUSH');
      const after = await Promise.all(Array.from({ length: 10 }, () => limiter.consume('after-flush', policy)));
      expect(after.every((decision) => decision.allowed && decision.store === 'redis')).toBe(true);
      expect(after.map((decision) => decision.remaining).sort((a, b) => b - a)).toEqual([84, 83, 82, 81, 80, 79, 78, 77, 76, 75]);
    } finally {
      pipelines.mockRestore();
      admin.disconnect();
    }
  });

  it('serves per-replica buckets from memory while Redis is down, logs it once, and shares again when it is back', async () => {
    const logger = recordingLogger();
    const limiter = await startLimiter(2, logger);
    expect(await limiter.consume('a', policy)).toMatchObject({ allowed: true, store: 'redis', remaining: 84 });

    await server.kill();
    const during = [];
    for (let i = 0; i < 60; i++) during.push(await limiter.consume('b', policy));
    // Half of business (250/min) per replica: ⌈250/6⌉ + 1 = 43 tokens.
    expect(during.every((decision) => decision.store === 'fallback')).toBe(true);
    expect(during.filter((decision) => decision.allowed).length).toBe(capacityInTokens(bucketFor(policy, 2)));
    expect(during[0]).toMatchObject({ policy, remaining: 42 });
    expect(limiter.status()).toMatchObject({ mode: 'fallback', replicas: 2, outages: 1, fallbackSince: expect.any(String) });
    expect(logger.lines.filter(([level]) => level === 'warn')).toHaveLength(1);

    await server.restart();
    await eventually(() => limiter.status().mode === 'redis', 5_000);
    expect(await limiter.consume('b', policy)).toMatchObject({ allowed: true, store: 'redis', remaining: 84 });
    expect(logger.lines.map(([level]) => level)).toEqual(['warn', 'info']);
    expect(limiter.status()).toEqual({ mode: 'redis', replicas: 2, outages: 1 });
  });

  it('keeps request latency bounded when Redis hangs, and recovers when it answers again', async () => {
    const logger = recordingLogger();
    const limiter = await startLimiter(1, logger);
    await limiter.consume('a', policy);
    server.pause();
    const before = performance.now();
    const first = await limiter.consume('a', policy);
    const firstMs = performance.now() - before;
    expect(first.store).toBe('fallback');
    expect(firstMs).toBeLessThan(500);
    const next = performance.now();
    for (let i = 0; i < 100; i++) expect((await limiter.consume('a', policy)).store).toBe('fallback');
    expect(performance.now() - next).toBeLessThan(100);

    server.resume();
    await eventually(() => limiter.status().mode === 'redis', 5_000);
    expect((await limiter.consume('a', policy)).store).toBe('redis');
    expect(logger.lines.map(([level]) => level)).toEqual(['warn', 'info']);
  });

  it('starts on the fallback when Redis is down, and moves to Redis once it is up', async () => {
    await server.kill();
    const limiter = await startLimiter();
    expect(limiter.status().mode).toBe('fallback');
    expect((await limiter.consume('a', policy)).store).toBe('fallback');
    await server.restart();
    await eventually(() => limiter.status().mode === 'redis', 5_000);
    expect((await limiter.consume('a', policy)).store).toBe('redis');
  });
});
