import fc from 'fast-check';
import { ManualClock } from './clock';
import { LeasedBuckets, SharedBuckets } from './leased-buckets';
import { bucketFor, BucketParameters, capacityInTokens } from './policy';
import type { TakeRequest, TokenHolder } from './leased-buckets';
import { LeaseOutcome, readBucket, returnSharedTokens, SharedBucketState, TakeOutcome, takeSharedTokens } from './token-bucket';

/**
 * The shared bucket as Redis keeps it (the same algorithm, holders' records included), on a manual
 * clock. A take leaves when the test says (`leave()`: how many it wants is asked then, as the Redis
 * store's end-of-turn pipeline does) and is answered when it says (`answer()`, which first lets
 * queued takes leave).
 */
class FakeShared implements SharedBuckets {
  readonly clock = new ManualClock();
  readonly buckets = new Map<string, SharedBucketState>();
  readonly takes: Array<{ key: string; wanted: number }> = [];
  /** What each take said its lease held as it left. */
  readonly reportedHeld: number[] = [];
  readonly queued: Array<() => () => void> = [];
  readonly pending: Array<() => void> = [];
  taken = 0;
  givenBack = 0;
  giveBackCalls = 0;
  failNext?: Error;

  take(key: string, bucket: BucketParameters, ask: () => TakeRequest, holder: TokenHolder): Promise<LeaseOutcome> {
    return new Promise((resolve, reject) =>
      this.queued.push(() => {
        const { wanted, held = 0, spending = wanted } = ask();
        this.takes.push({ key, wanted });
        this.reportedHeld.push(held);
        return () => {
          if (this.failNext) {
            reject(this.failNext);
            this.failNext = undefined;
            return;
          }
          const { outcome, state } = takeSharedTokens(this.stateOf(key), this.clock.nowMicros(), bucket, wanted, {
            holder: holder.id,
            held,
            spending,
            ttlMicros: holder.ttlMs * 1_000,
          });
          this.buckets.set(key, state);
          this.taken += outcome.taken;
          resolve(outcome);
        };
      }),
    );
  }

  async giveBack(key: string, bucket: BucketParameters, count: number, holder: TokenHolder): Promise<void> {
    this.giveBackCalls += 1;
    this.givenBack += count;
    this.buckets.set(key, returnSharedTokens(this.stateOf(key), this.clock.nowMicros(), bucket, count, { holder: holder.id, held: 0, ttlMicros: holder.ttlMs * 1_000 }));
  }

  /** The takes sent so far leave for the store. */
  leave(): void {
    for (const leave of this.queued.splice(0)) this.pending.push(leave());
  }

  /** Lets the takes sent so far leave, answers every take that has left, then lets their continuations run. */
  async answer(): Promise<void> {
    this.leave();
    for (const reply of this.pending.splice(0)) reply();
    await flush();
  }

  get outstanding(): number {
    return this.queued.length + this.pending.length;
  }

  /** Whole tokens a take would find now (what the records hold apart). */
  remaining(key: string, bucket: BucketParameters): number {
    const { bucket: now } = returnSharedTokens(this.stateOf(key), this.clock.nowMicros(), bucket, 0, { holder: '', held: 0, ttlMicros: 0 });
    return readBucket(now?.level ?? bucket.capacity, bucket).remaining;
  }

  /** Tokens the records of live holders count. */
  recorded(key: string): number {
    let held = 0;
    for (const record of this.stateOf(key).holders.values()) if (record.expiresAt > this.clock.nowMicros()) held += record.held;
    return held;
  }

  private stateOf(key: string): SharedBucketState {
    return this.buckets.get(key) ?? { holders: new Map() };
  }
}

async function flush(): Promise<void> {
  for (let i = 0; i < 5; i++) await Promise.resolve();
}

/** Requests of one tenant faster than a round trip: each round, some arrive before the take leaves and some while it is out. */
async function stream(buckets: LeasedBuckets, shared: FakeShared, key: string, bucket: BucketParameters, rounds: number): Promise<void> {
  for (let round = 0; round < rounds; round++) {
    for (let i = 0; i < 5; i++) void buckets.take(key, bucket);
    shared.leave();
    for (let i = 0; i < 5; i++) void buckets.take(key, bucket);
    await shared.answer();
  }
  await shared.answer();
}

const BUSINESS = bucketFor({ name: 'business', limit: 500 }); // 85 tokens
const ENTERPRISE = bucketFor({ name: 'enterprise', limit: 600_000 }); // 100,001 tokens
const THOUSAND_A_SECOND = bucketFor({ name: 'enterprise', limit: 60_000 }); // 10,001 tokens, 1,000 a second

function remainingOf(outcome: TakeOutcome, bucket: BucketParameters): number {
  return readBucket(outcome.level, bucket).remaining;
}

describe('LeasedBuckets', () => {
  let now = 0;
  const leased = (shared: SharedBuckets, holdMs = 100): LeasedBuckets => new LeasedBuckets(shared, { holdMs, now: () => now });
  const opened: LeasedBuckets[] = [];
  afterEach(async () => {
    for (const buckets of opened.splice(0)) await buckets.close();
  });
  function open(shared: SharedBuckets, holdMs?: number): LeasedBuckets {
    const buckets = leased(shared, holdMs);
    opened.push(buckets);
    return buckets;
  }

  it('takes one token per request, exactly, when requests come one at a time', async () => {
    const shared = new FakeShared();
    const buckets = open(shared);
    const seen: number[] = [];
    for (let i = 0; i < 20; i++) {
      const decision = buckets.take('t', BUSINESS);
      await shared.answer();
      const outcome = await decision;
      expect(outcome.allowed).toBe(true);
      seen.push(remainingOf(outcome, BUSINESS));
      expect(buckets.heldFor('t')).toBe(0);
    }
    expect(seen).toEqual(Array.from({ length: 20 }, (_, index) => 84 - index));
    expect(shared.takes).toEqual(Array.from({ length: 20 }, () => ({ key: 't', wanted: 1 })));
  });

  it('asks once for the requests of one turn, each decided with its own remaining count', async () => {
    const shared = new FakeShared();
    const buckets = open(shared);
    const decisions = Array.from({ length: 10 }, () => buckets.take('t', BUSINESS));
    await shared.answer();
    const outcomes = await Promise.all(decisions);
    expect(shared.takes).toEqual([{ key: 't', wanted: 10 }]);
    expect(outcomes.every((outcome) => outcome.allowed)).toBe(true);
    expect(outcomes.map((outcome) => remainingOf(outcome, BUSINESS))).toEqual([84, 83, 82, 81, 80, 79, 78, 77, 76, 75]);
    expect(shared.remaining('t', BUSINESS)).toBe(75);
  });

  it('takes ahead once requests arrive during a round trip, and then admits most without one', async () => {
    const shared = new FakeShared();
    const buckets = open(shared);
    let admitted = 0;
    const decide = (): void => void buckets.take('t', ENTERPRISE).then((outcome) => (admitted += outcome.allowed ? 1 : 0));
    // 20 rounds: 5 requests arrive before the take leaves and 5 while it is out, then it is answered.
    for (let round = 0; round < 20; round++) {
      for (let i = 0; i < 5; i++) decide();
      shared.leave();
      for (let i = 0; i < 5; i++) decide();
      await shared.answer();
    }
    await shared.answer();
    await shared.answer();
    expect(admitted).toBe(200);
    // One round trip per request would be 200 takes; ahead of demand it is about one per round.
    expect(shared.takes.length).toBeLessThanOrEqual(22);
    expect(shared.takes.some(({ wanted }) => wanted > 10)).toBe(true);
    // Never more admitted than taken: the rest is held, and goes back once held too long.
    expect(admitted + buckets.heldFor('t')).toBe(shared.taken);
    now += 100;
    await buckets.sweep();
    expect(buckets.heldFor('t')).toBe(0);
    expect(shared.givenBack).toBe(shared.taken - admitted);
    expect(shared.remaining('t', ENTERPRISE)).toBe(100_001 - 200);
  });

  it('asks ahead for at most a sixteenth of the bucket', async () => {
    const shared = new FakeShared();
    const buckets = open(shared);
    const decisions: Array<Promise<TakeOutcome>> = [];
    for (let round = 0; round < 5; round++) {
      for (let i = 0; i < 40; i++) decisions.push(buckets.take('t', BUSINESS));
      await shared.answer();
    }
    await shared.answer();
    await shared.answer();
    await Promise.all(decisions);
    const waitingAtMost = 40;
    expect(Math.max(...shared.takes.map(({ wanted }) => wanted))).toBeLessThanOrEqual(waitingAtMost + Math.floor(85 / 16));
  });

  it('admits what the bucket holds and refuses the rest, with no take after it ran dry', async () => {
    const shared = new FakeShared();
    const buckets = open(shared);
    const first = await Promise.all([buckets.take('t', BUSINESS), shared.answer()]);
    expect(first[0].allowed).toBe(true);
    const decisions = Array.from({ length: 100 }, () => buckets.take('t', BUSINESS));
    await shared.answer();
    const outcomes = await Promise.all(decisions);
    expect(outcomes.filter((outcome) => outcome.allowed)).toHaveLength(84);
    const refused = outcomes.filter((outcome) => !outcome.allowed);
    expect(refused).toHaveLength(16);
    expect(refused.every((outcome) => remainingOf(outcome, BUSINESS) === 0)).toBe(true);
    expect(shared.takes).toHaveLength(2);
  });

  it('passes a failed take to every request waiting for it, and takes again afterwards', async () => {
    const shared = new FakeShared();
    const buckets = open(shared);
    shared.failNext = new Error('Redis is away');
    const decisions = Array.from({ length: 3 }, () => buckets.take('t', BUSINESS));
    await shared.answer();
    for (const decision of decisions) await expect(decision).rejects.toThrow('Redis is away');
    const after = buckets.take('t', BUSINESS);
    await shared.answer();
    expect(await after).toMatchObject({ allowed: true });
  });

  it('forgets what it holds when dropped, and gives it back when closed', async () => {
    const shared = new FakeShared();
    const buckets = leased(shared);
    await stream(buckets, shared, 't', ENTERPRISE, 3);
    expect(buckets.heldFor('t')).toBeGreaterThan(0);
    buckets.drop();
    expect(buckets.heldFor('t')).toBe(0);
    expect(shared.givenBack).toBe(0);

    await stream(buckets, shared, 'u', ENTERPRISE, 3);
    const held = buckets.heldFor('u');
    expect(held).toBeGreaterThan(0);
    await buckets.close();
    expect(shared.givenBack).toBe(held);
  });

  it('when closed with a take in flight, waits for it and gives back once it is answered, not before', async () => {
    const shared = new FakeShared();
    const buckets = leased(shared);
    await stream(buckets, shared, 't', ENTERPRISE, 3);
    for (let i = 0; i < 100 && shared.outstanding === 0; i++) void buckets.take('t', ENTERPRISE);
    expect(shared.outstanding).toBe(1);
    shared.leave();
    const calls = shared.giveBackCalls;
    let closed = false;
    const closing = buckets.close().then(() => (closed = true));
    // A give-back now could clear the record the take in flight is writing; and close() waits for
    // the take (the connection closes after it).
    await flush();
    expect(shared.giveBackCalls).toBe(calls);
    expect(closed).toBe(false);
    await shared.answer();
    await closing;
    expect(shared.giveBackCalls).toBe(calls + 1);
    expect(buckets.heldFor('t')).toBe(0);
    expect(shared.recorded('t')).toBe(0);
  });

  it('still gives back what a take brought after drop(), on its own timer', async () => {
    const shared = new FakeShared();
    const buckets = open(shared, 20);
    await stream(buckets, shared, 't', ENTERPRISE, 3);
    for (let i = 0; i < 100 && shared.outstanding === 0; i++) void buckets.take('t', ENTERPRISE);
    expect(shared.outstanding).toBe(1);
    buckets.drop();
    await shared.answer();
    expect(buckets.heldFor('t')).toBeGreaterThan(0);
    now += 20;
    const deadline = Date.now() + 2_000;
    while (buckets.heldFor('t') > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(buckets.heldFor('t')).toBe(0);
    expect(shared.givenBack).toBeGreaterThan(0);
  });

  it('after a tier change, decides against the new bucket and gives the old one its tokens back', async () => {
    const shared = new FakeShared();
    const buckets = open(shared);
    await stream(buckets, shared, 't', ENTERPRISE, 3);
    const heldBefore = buckets.heldFor('t');
    expect(heldBefore).toBeGreaterThan(0);
    const after = buckets.take('t', BUSINESS);
    await shared.answer();
    const outcome = await after;
    expect(outcome.allowed).toBe(true);
    expect(outcome.level).toBeLessThanOrEqual(BUSINESS.capacity);
    expect(buckets.heldFor('t')).toBe(heldBefore);
    now += 100;
    await buckets.sweep();
    expect(buckets.heldFor('t')).toBe(0);
    expect(shared.givenBack).toBe(heldBefore);
  });

  it('refuses only the requests a short take covered; those arriving after it left get a take of their own', async () => {
    const shared = new FakeShared();
    const buckets = open(shared);
    // Empty the bucket but for 3 tokens.
    const drain = Array.from({ length: 82 }, () => buckets.take('t', BUSINESS));
    await shared.answer();
    expect((await Promise.all(drain)).every((outcome) => outcome.allowed)).toBe(true);
    const early = Array.from({ length: 5 }, () => buckets.take('t', BUSINESS));
    shared.leave();
    const late = Array.from({ length: 2 }, () => buckets.take('t', BUSINESS));
    await shared.answer();
    const earlyOutcomes = await Promise.all(early);
    expect(earlyOutcomes.map((outcome) => outcome.allowed)).toEqual([true, true, true, false, false]);
    expect(shared.outstanding).toBe(1);
    // The bucket refills one token by the time the late requests' take runs (8⅓ a second).
    shared.clock.advanceMicros(120_000);
    await shared.answer();
    const lateOutcomes = await Promise.all(late);
    expect(lateOutcomes.map((outcome) => outcome.allowed)).toEqual([true, false]);
    // The third asks for its 2 and, as 2 arrived while the second was out, 4 ahead.
    expect(shared.takes.map(({ wanted }) => wanted)).toEqual([82, 5, 6]);
  });

  it('takes nothing ahead when told so: a take asks for the requests waiting, no more', async () => {
    const shared = new FakeShared();
    const buckets = new LeasedBuckets(shared, { now: () => now, maxLeaseTokens: 0 });
    opened.push(buckets);
    await stream(buckets, shared, 't', ENTERPRISE, 10);
    expect(buckets.heldFor('t')).toBe(0);
    // Each take asks for exactly the requests waiting when it leaves (those that came while the
    // previous one was out, and this turn's): 100 tokens for 100 requests, none held.
    expect(shared.takes.map(({ wanted }) => wanted)).toEqual([5, ...Array.from({ length: 9 }, () => 10), 5]);
    expect(shared.taken).toBe(100);
  });

  it('keeps keys apart', async () => {
    const shared = new FakeShared();
    const buckets = open(shared);
    await stream(buckets, shared, 'a', ENTERPRISE, 3);
    expect(buckets.heldFor('a')).toBeGreaterThan(0);
    const other = buckets.take('b', BUSINESS);
    await shared.answer();
    expect(remainingOf(await other, BUSINESS)).toBe(84);
  });

  it('keeps a record of what it holds, so that no replica and no refill gets past the capacity less that', async () => {
    const shared = new FakeShared();
    // Records that outlive the minute below (the tokens are not spent past half of it).
    const a = new LeasedBuckets(shared, { now: () => now, recordTtlMs: 120_000 });
    const b = new LeasedBuckets(shared, { now: () => now, recordTtlMs: 120_000 });
    opened.push(a, b);
    // Replica a takes ahead on a busy business tenant: what it holds is on its record.
    await stream(a, shared, 't', BUSINESS, 1);
    const held = a.heldFor('t');
    expect(held).toBeGreaterThan(0);
    expect(shared.recorded('t')).toBe(held);
    // A minute later the bucket would be full, but it refills only to its capacity less what a holds.
    shared.clock.advanceMicros(60_000_000);
    expect(shared.remaining('t', BUSINESS)).toBe(85 - held);
    const drain = Array.from({ length: 100 }, () => b.take('t', BUSINESS));
    await shared.answer();
    expect((await Promise.all(drain)).filter((outcome) => outcome.allowed)).toHaveLength(85 - held);
    // Once a gives its tokens back (nothing came for holdMs), they are b's to take.
    now += 100;
    await a.sweep();
    expect(shared.recorded('t')).toBe(0);
    const more = Array.from({ length: 10 }, () => b.take('t', BUSINESS));
    await shared.answer();
    expect((await Promise.all(more)).filter((outcome) => outcome.allowed)).toHaveLength(held);
  });

  it('clears its record once idle even when every token it held was spent', async () => {
    const shared = new FakeShared();
    const buckets = open(shared);
    // The second round's requests spend what the first took ahead, and the tokens its take brings
    // are spent as it is answered: nothing is held, but the record counts what was spent since.
    await stream(buckets, shared, 't', BUSINESS, 2);
    expect(buckets.heldFor('t')).toBe(0);
    expect(shared.recorded('t')).toBeGreaterThan(0);
    expect(shared.remaining('t', BUSINESS)).toBe(85 - 20);
    now += 100;
    await buckets.sweep();
    expect(shared.recorded('t')).toBe(0);
    expect(shared.givenBack).toBe(0);
    expect(shared.remaining('t', BUSINESS)).toBe(85 - 20);
  });

  it('spends nothing past half its record’s lifetime, and a replica that stopped loses what it held once its record lapses', async () => {
    const shared = new FakeShared();
    const stopped = leased(shared);
    await stream(stopped, shared, 't', BUSINESS, 1);
    const held = stopped.heldFor('t');
    expect(held).toBeGreaterThan(0);
    expect(shared.recorded('t')).toBe(held);
    // Half the record's lifetime (1 s) after its last take, with no sweep: the tokens are not spent.
    now += 500;
    shared.clock.advanceMicros(500_000);
    const late = stopped.take('t', BUSINESS);
    expect(shared.outstanding).toBe(1);
    await shared.answer();
    expect(await late).toMatchObject({ allowed: true });
    // It reported nothing held: its record is what this take brought.
    expect(shared.reportedHeld.at(-1)).toBe(0);
    expect(shared.recorded('t')).toBe(stopped.heldFor('t'));
    // Another replica, after the record has lapsed, takes the whole bucket back (this one never gave back).
    const other = open(shared);
    now += 1_000;
    shared.clock.advanceMicros(60_000_000);
    expect(shared.recorded('t')).toBe(0);
    const all = Array.from({ length: 90 }, () => other.take('t', BUSINESS));
    await shared.answer();
    expect((await Promise.all(all)).filter((outcome) => outcome.allowed)).toHaveLength(85);
  });

  it('drops tokens its record no longer counts (the store lost them)', async () => {
    const shared = new FakeShared();
    const buckets = open(shared);
    await stream(buckets, shared, 't', ENTERPRISE, 3);
    expect(buckets.heldFor('t')).toBeGreaterThan(0);
    // The store forgets the key (a flushed Redis): a take that reports the tokens held finds no record.
    shared.buckets.delete('t');
    for (let i = 0; i < 1_000 && shared.outstanding === 0; i++) void buckets.take('t', ENTERPRISE);
    const reported = buckets.heldFor('t');
    await shared.answer();
    expect(shared.recorded('t')).toBe(buckets.heldFor('t'));
    expect(buckets.heldFor('t')).toBeLessThanOrEqual(shared.takes.at(-1)?.wanted ?? 0);
    expect(reported).toBeGreaterThan(0);
  });

  it('keeps the refill a record held off when the record falls: the level and the tokens held never exceed the capacity together', () => {
    const bucket = THOUSAND_A_SECOND;
    const capacity = capacityInTokens(bucket);
    const a = { holder: 'a', ttlMicros: 1_000_000 };
    // t = 0: a takes 20, 10 for the requests waiting and 10 ahead.
    let state: SharedBucketState = { holders: new Map() };
    let step = takeSharedTokens(state, 0, bucket, 20, { ...a, held: 0, spending: 10 });
    expect(step.outcome.taken).toBe(20);
    state = step.state;
    // 90 ms later (90 tokens of refill) a has spent its 10 and takes 11 (1 waiting, 10 ahead): while
    // its record counted 10, the bucket could not refill past capacity − 10.
    step = takeSharedTokens(state, 90_000, bucket, 11, { ...a, held: 0, spending: 1 });
    expect(step.outcome).toMatchObject({ taken: 11, held: 0 });
    state = step.state;
    expect(Math.floor(step.outcome.level / bucket.cost)).toBe(capacity - 21);
    // Another replica takes all it can at that moment: with a's 10 held, 10 + 1 + what it gets stays within B.
    const other = takeSharedTokens(state, 90_000, bucket, 100_000);
    expect(other.outcome.taken).toBe(capacity - 21);
    // A give-back that only clears a record hands back nothing either.
    const cleared = returnSharedTokens(step.state, 90_000, bucket, 0, { ...a, held: 0 });
    expect(takeSharedTokens(cleared, 90_000, bucket, 100_000).outcome.taken).toBe(capacity - 21);
  });

  it('never admits more than B + r·Δ in any interval Δ, across replicas, whatever the arrivals, round trips and pauses (property)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.record({
            replica: fc.integer({ min: 0, max: 2 }),
            // Sometimes enough at once to drain the bucket; pauses within and beyond a record's life.
            arrivals: fc.oneof(fc.integer({ min: 0, max: 12 }), fc.integer({ min: 0, max: 100 })),
            leave: fc.boolean(),
            later: fc.integer({ min: 0, max: 10 }),
            answer: fc.boolean(),
            advanceMs: fc.oneof(fc.integer({ min: 0, max: 80 }), fc.integer({ min: 0, max: 600 }), fc.integer({ min: 0, max: 1_500 })),
            sweep: fc.boolean(),
          }),
          {
            minLength: 1,
            maxLength: 60,
          },
        ),
        // A real tier, and a small bucket that refills fast (64 tokens, 200 a second: no tier's
        // shape, but it lets a few steps' requests and pauses reach both its ends).
        fc.constantFrom(BUSINESS, { capacity: 64 * 60_000_000, cost: 60_000_000, refill: 12_000 }),
        async (steps, bucket) => {
          now = 0;
          const shared = new FakeShared();
          const replicas = [leased(shared, 50), leased(shared, 50), leased(shared, 50)];
          const outcomes: TakeOutcome[] = [];
          const admittedAt: number[] = [];
          let arrived = 0;
          const arrive = (replica: number, count: number): void => {
            arrived += count;
            for (let i = 0; i < count; i++)
              void replicas[replica].take('t', bucket).then((outcome) => {
                outcomes.push(outcome);
                if (outcome.allowed) admittedAt.push(shared.clock.nowMicros());
              });
          };
          for (const step of steps) {
            arrive(step.replica, step.arrivals);
            if (step.leave) shared.leave();
            arrive(step.replica, step.later);
            if (step.answer) await shared.answer();
            await flush();
            now += step.advanceMs;
            shared.clock.advanceMicros(step.advanceMs * 1_000);
            if (step.sweep) await Promise.all(replicas.map((replica) => replica.sweep()));
          }
          for (let i = 0; i < 50 && shared.outstanding > 0; i++) await shared.answer();
          // Every request was decided.
          expect(outcomes).toHaveLength(arrived);
          // No interval admitted more than the bucket's capacity and what it refilled meanwhile.
          for (let first = 0; first < admittedAt.length; first++) {
            for (let last = first; last < admittedAt.length; last++) {
              const count = last - first + 1;
              if (count * bucket.cost > bucket.capacity + (admittedAt[last] - admittedAt[first]) * bucket.refill) {
                throw new Error(`${count} admitted within ${admittedAt[last] - admittedAt[first]} µs`);
              }
            }
          }
          const admitted = admittedAt.length;
          const held = replicas.reduce((sum, replica) => sum + replica.heldFor('t'), 0);
          expect(admitted + held + shared.givenBack).toBeLessThanOrEqual(shared.taken);
          const givenBackBefore = shared.givenBack;
          for (const replica of replicas) await replica.close();
          expect(shared.givenBack - givenBackBefore).toBeLessThanOrEqual(held);
        },
      ),
      { numRuns: 1_000 },
    );
  });
});
