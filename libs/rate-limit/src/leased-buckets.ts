import { randomBytes } from 'node:crypto';
import { BucketParameters, capacityInTokens } from './policy';
import { LeaseOutcome, TakeOutcome } from './token-bucket';

/** What a take asks for, when it leaves. */
export interface TakeRequest {
  /** Tokens wanted (a positive integer): as many as the bucket holds, up to this. */
  readonly wanted: number;
  /** A holder's take: how many of the tokens taken are spent at once, and what it holds already. */
  readonly spending?: number;
  readonly held?: number;
}

/** A holder of tokens taken ahead (one lease of one replica) and how long its record lasts. */
export interface TokenHolder {
  readonly id: string;
  readonly ttlMs: number;
}

/** The shared buckets a lease is taken from: the Redis store, or a fake in tests. */
export interface SharedBuckets {
  /**
   * Takes up to `ask().wanted` tokens (at least one): as many as the bucket holds, never above its
   * capacity less what holders hold. `ask` is called when the take leaves, so that requests
   * arriving until then count; of the tokens taken, `spending` are spent at once and the rest join
   * the holder's record (takeSharedTokens in token-bucket.ts).
   */
  take(key: string, bucket: BucketParameters, ask: () => TakeRequest, holder: TokenHolder): Promise<LeaseOutcome>;
  /** Puts back tokens taken earlier and not spent (0: only clears the holder's record). */
  giveBack(key: string, bucket: BucketParameters, count: number, holder: TokenHolder): Promise<void>;
}

export interface LeasedBucketsOptions {
  /** Tokens held and not spent this long after their take go back to the shared bucket. */
  readonly holdMs?: number;
  /** The most one take may ask for ahead of the requests waiting, as a share of the bucket's capacity. */
  readonly maxLeaseShare?: number;
  /** And in tokens, whatever the capacity; 0 takes nothing ahead (only the requests of one turn together). */
  readonly maxLeaseTokens?: number;
  /**
   * How long the shared store keeps a lease's record of the tokens it holds after its last take
   * (a replica that dies loses them then); the lease spends none more than half of it after the
   * take left.
   */
  readonly recordTtlMs?: number;
  /** Milliseconds, for tests. */
  readonly now?: () => number;
}

interface Waiter {
  resolve(outcome: TakeOutcome): void;
  reject(error: unknown): void;
}

interface Lease {
  readonly key: string;
  /** Its name in the shared store's records of held tokens. */
  readonly holder: TokenHolder;
  /** Tokens taken from the shared bucket and not spent yet. */
  held: number;
  /** The shared bucket's level as its last take left it (grains). */
  level: number;
  /** When the tokens held were taken (ms). */
  takenAt: number;
  /** Tokens held may be spent until then (ms): half the record's lifetime after the last take left. */
  spendBy: number;
  /** Tokens the shared store's record may still count for this lease (spent or not). */
  recorded: number;
  /** The bucket the tokens are taken under (and given back to). */
  readonly bucket: BucketParameters;
  /** Requests waiting for the take in flight. */
  readonly waiters: Waiter[];
  inFlight: boolean;
  /** The take in flight has left (its count was asked): arrivals from then on are a round trip's demand. */
  left: boolean;
  /** Requests waiting when the take in flight left: the ones it covers. */
  covered: number;
  /** Requests arriving while a take is in flight (smoothed over takes): the demand one round trip sees. */
  arrivedDuringTake: number;
  arrivals: number;
}

const DEFAULT_HOLD_MS = 100;
const DEFAULT_MAX_LEASE_SHARE = 1 / 16;
const DEFAULT_MAX_LEASE_TOKENS = 1_000;
const DEFAULT_RECORD_TTL_MS = 1_000;

/**
 * Requests decided against shared buckets without a round trip each, when they come faster than
 * one round trip. A request with nothing held waits for a take from the shared bucket; a take asks,
 * when it leaves, for the requests then waiting plus, once requests have arrived while takes were
 * out, twice that demand ahead (smoothed; the part ahead at most a sixteenth of the bucket and
 * `maxLeaseTokens`), and the next take is sent before what is held runs out. A request arriving one
 * at a time (a client waiting for each answer) takes exactly one token per round trip, as before.
 *
 * Nothing is admitted that was not taken from the shared bucket, and the bucket keeps a record of
 * what each lease of each replica holds and refills under it (never above its capacity less what
 * the live records count, as they stood since it was last written): the bucket's level and every
 * token held together never exceed the capacity, so every replica together admits at most B + r·Δ
 * in any Δ seconds, as one take per request would. Each take tells the store what the lease still
 * holds (its record can only fall that way) and how many of the new tokens go at once to the
 * requests that waited for it. Unspent tokens go back once no take has come for `holdMs`, and an
 * idle lease clears its record; a record lapses `recordTtlMs` after its last take (a replica that
 * died), and a lease spends nothing past half of that. What it costs: a record counts tokens spent
 * since the lease's last take, so near full the bucket refills later than it would without
 * holders, and what one replica holds is out of the others' reach until spent or given back
 * (RedisRateLimiterOptions.maxTakeAhead). One lease per key and bucket: after a tier change the old
 * tokens go back, unspent. The level reported is the shared level as the last take left it
 * plus what this replica holds.
 */
export class LeasedBuckets {
  private readonly leases = new Map<string, Lease>();
  private readonly holdMs: number;
  private readonly maxLeaseShare: number;
  private readonly maxLeaseTokens: number;
  private readonly now: () => number;
  private readonly recordTtlMs: number;
  /** This replica's prefix in the holders' records; each lease adds a serial number. */
  private readonly replica = randomBytes(9).toString('base64url');
  private serial = 0;
  /** Takes and give-backs not yet answered: close() waits for them. */
  private readonly unanswered = new Set<Promise<unknown>>();
  private sweeper?: NodeJS.Timeout;
  private closed = false;

  constructor(
    private readonly shared: SharedBuckets,
    options: LeasedBucketsOptions = {},
  ) {
    this.holdMs = options.holdMs ?? DEFAULT_HOLD_MS;
    this.maxLeaseShare = options.maxLeaseShare ?? DEFAULT_MAX_LEASE_SHARE;
    this.maxLeaseTokens = options.maxLeaseTokens ?? DEFAULT_MAX_LEASE_TOKENS;
    this.now = options.now ?? (() => performance.now());
    this.recordTtlMs = options.recordTtlMs ?? DEFAULT_RECORD_TTL_MS;
    if (!(this.recordTtlMs >= 2 * this.holdMs)) throw new RangeError(`recordTtlMs (${this.recordTtlMs}) must be at least twice holdMs (${this.holdMs})`);
  }

  take(key: string, bucket: BucketParameters): Promise<TakeOutcome> {
    // A lease per bucket: after a tier change, tokens taken under the old one are never spent under
    // the new one (they go back with the sweep), and levels are always read against their own bucket.
    const leaseKey = `${key}\u0000${bucket.capacity}:${bucket.cost}:${bucket.refill}`;
    let lease = this.leases.get(leaseKey);
    if (!lease) {
      const holder = { id: `${this.replica}.${(this.serial += 1)}`, ttlMs: this.recordTtlMs };
      lease = {
        key,
        holder,
        held: 0,
        level: 0,
        takenAt: 0,
        spendBy: 0,
        recorded: 0,
        bucket,
        waiters: [],
        inFlight: false,
        left: false,
        covered: 0,
        arrivedDuringTake: 0,
        arrivals: 0,
      };
      this.leases.set(leaseKey, lease);
      this.startSweeping();
    }
    if (lease.inFlight && lease.left) lease.arrivals += 1;
    this.expire(lease);
    if (lease.held > 0 && lease.waiters.length === 0) {
      const outcome = this.spend(lease);
      // Requests came faster than a round trip: the next take leaves before these run out.
      if (!lease.inFlight && lease.arrivedDuringTake > 0 && lease.held <= lease.arrivedDuringTake && this.aheadFor(lease) > lease.held) this.sendTake(lease);
      return Promise.resolve(outcome);
    }
    return new Promise<TakeOutcome>((resolve, reject) => {
      lease.waiters.push({ resolve, reject });
      if (!lease.inFlight) this.sendTake(lease);
    });
  }

  /** Tokens held by this replica for `key`, under any bucket (tests, diagnostics). */
  heldFor(key: string): number {
    let held = 0;
    for (const lease of this.leases.values()) if (lease.key === key) held += lease.held;
    return held;
  }

  /** Gives back what has been held longer than `holdMs`, and forgets idle keys. */
  async sweep(): Promise<void> {
    const now = this.now();
    const returns: Array<Promise<void>> = [];
    for (const [leaseKey, lease] of this.leases) {
      if (lease.inFlight || lease.waiters.length > 0 || now - lease.takenAt < this.holdMs) continue;
      // Unspent tokens go back; a record of tokens since spent goes too, so that the bucket may
      // refill to its capacity again.
      if (lease.held > 0 || lease.recorded > 0) returns.push(this.giveBack(lease));
      else this.leases.delete(leaseKey);
    }
    await Promise.all(returns);
    if (this.leases.size === 0) this.stopSweeping();
  }

  /** Forgets every token held without giving it back (the shared store is unreachable). */
  drop(): void {
    for (const [leaseKey, lease] of this.leases) if (!lease.inFlight && lease.waiters.length === 0) this.leases.delete(leaseKey);
    for (const lease of this.leases.values()) {
      lease.held = 0;
      lease.arrivedDuringTake = 0;
    }
    // Leases with a take in flight stay: the sweep forgets them once it is answered.
    if (this.leases.size === 0) this.stopSweeping();
  }

  /**
   * Gives back every token held (best effort) and stops, once every take in flight is answered (the
   * connection may close after this).
   */
  async close(): Promise<void> {
    this.closed = true;
    this.stopSweeping();
    // A lease with a take in flight gives back once it is answered (taken()): a give-back now could
    // clear the record that take is writing while its tokens are still to be spent.
    for (const lease of this.leases.values()) if (!lease.inFlight && (lease.held > 0 || lease.recorded > 0)) void this.giveBack(lease);
    while (this.unanswered.size > 0) await Promise.allSettled([...this.unanswered]);
  }

  private track<T>(promise: Promise<T>): Promise<T> {
    this.unanswered.add(promise);
    void promise.finally(() => this.unanswered.delete(promise)).catch(() => undefined);
    return promise;
  }

  /** Tokens held past half their record's lifetime are not spent: the shared store may have let them go. */
  private expire(lease: Lease): void {
    if (lease.held > 0 && this.now() >= lease.spendBy) lease.held = 0;
  }

  private spend(lease: Lease): TakeOutcome {
    lease.held -= 1;
    const level = Math.min(lease.bucket.capacity, lease.level + lease.held * lease.bucket.cost);
    return { allowed: true, level };
  }

  /** How many tokens a take may ask for beyond the requests waiting: twice a round trip's demand, capped. */
  private aheadFor(lease: Lease): number {
    return Math.min(lease.arrivedDuringTake * 2, this.maxLeaseTokens, Math.floor(capacityInTokens(lease.bucket) * this.maxLeaseShare));
  }

  private sendTake(lease: Lease): void {
    const { bucket } = lease;
    const ahead = this.aheadFor(lease);
    let request: Required<TakeRequest> | undefined;
    let leftAt = 0;
    // Asked when the take leaves: the requests waiting by then are what it covers (their tokens
    // are spent as it is answered); those arriving after it left are the demand a round trip sees.
    const ask = (): TakeRequest => {
      this.expire(lease);
      const uncovered = Math.max(0, lease.waiters.length - lease.held);
      request = { wanted: Math.max(1, uncovered + ahead), held: lease.held, spending: uncovered };
      leftAt = this.now();
      lease.covered = lease.waiters.length;
      lease.left = true;
      return request;
    };
    lease.inFlight = true;
    lease.left = false;
    lease.arrivals = 0;
    void this.track(this.shared.take(lease.key, bucket, ask, lease.holder)).then(
      (outcome) => this.taken(lease, outcome, request, leftAt),
      (error: unknown) => {
        lease.inFlight = false;
        lease.arrivedDuringTake = 0;
        for (const waiter of lease.waiters.splice(0)) waiter.reject(error);
      },
    );
  }

  private taken(lease: Lease, outcome: LeaseOutcome, request: Required<TakeRequest> | undefined, leftAt: number): void {
    lease.inFlight = false;
    // Quick to rise, halving when demand falls: one take that happened to see few arrivals does not
    // make the next one wait.
    lease.arrivedDuringTake = Math.max(lease.arrivals, Math.floor((lease.arrivedDuringTake + lease.arrivals) / 2));
    lease.level = outcome.level;
    if (request) {
      // Tokens the store no longer counted for this lease (its record had lapsed) are not spent.
      const recognised = Math.min(request.held, outcome.held ?? request.held);
      lease.held = Math.max(0, lease.held - (request.held - recognised));
      lease.recorded = recognised + outcome.taken - Math.min(outcome.taken, request.spending);
      lease.spendBy = leftAt + this.recordTtlMs / 2;
    }
    if (outcome.taken > 0) {
      lease.held += outcome.taken;
      lease.takenAt = this.now();
      // A take answered after drop() stopped the sweep still goes back in time.
      this.startSweeping();
    }
    // Waiters in arrival order: those the tokens cover are admitted. When the take got less than it
    // asked for, the bucket had nothing more when it ran: the requests that were waiting when it
    // left are refused at that level. Those that arrived after it left get a take of their own.
    let covered = lease.covered;
    while (lease.waiters.length > 0 && lease.held > 0) {
      (lease.waiters.shift() as Waiter).resolve(this.spend(lease));
      covered -= 1;
    }
    if (request !== undefined && outcome.taken < request.wanted) {
      for (const waiter of lease.waiters.splice(0, Math.max(0, covered))) waiter.resolve({ allowed: false, level: outcome.level });
    }
    if (lease.waiters.length > 0) this.sendTake(lease);
    if (this.closed && (lease.held > 0 || lease.recorded > 0)) void this.giveBack(lease);
  }

  private giveBack(lease: Lease): Promise<void> {
    this.expire(lease);
    const count = lease.held;
    lease.held = 0;
    lease.recorded = 0;
    // Best effort: a give-back that fails leaves the bucket emptier than it is, never fuller (the
    // record lapses on its own).
    return this.track(this.shared.giveBack(lease.key, lease.bucket, count, lease.holder)).catch(() => undefined);
  }

  private startSweeping(): void {
    if (this.sweeper || this.closed) return;
    this.sweeper = setInterval(() => void this.sweep(), Math.max(10, this.holdMs / 2)).unref();
  }

  private stopSweeping(): void {
    clearInterval(this.sweeper);
    this.sweeper = undefined;
  }
}
