import { BucketParameters, capacityInTokens } from './policy';
import { LeaseOutcome, TakeOutcome } from './token-bucket';

/** The shared buckets a lease is taken from: the Redis store, or a fake in tests. */
export interface SharedBuckets {
  /**
   * Takes up to `wanted()` tokens (at least one): as many as the bucket holds. `wanted` is asked
   * when the take leaves, so that requests arriving until then count.
   */
  take(key: string, bucket: BucketParameters, wanted: () => number): Promise<LeaseOutcome>;
  /** Puts back tokens taken earlier and not spent. */
  giveBack(key: string, bucket: BucketParameters, count: number): Promise<void>;
}

export interface LeasedBucketsOptions {
  /** Tokens held and not spent this long after their take go back to the shared bucket. */
  readonly holdMs?: number;
  /** The most one take may ask for ahead of the requests waiting, as a share of the bucket's capacity. */
  readonly maxLeaseShare?: number;
  /** And in tokens, whatever the capacity. */
  readonly maxLeaseTokens?: number;
  /** Milliseconds, for tests. */
  readonly now?: () => number;
}

interface Waiter {
  resolve(outcome: TakeOutcome): void;
  reject(error: unknown): void;
}

interface Lease {
  /** Tokens taken from the shared bucket and not spent yet. */
  held: number;
  /** The shared bucket's level as its last take left it (grains). */
  level: number;
  /** When the tokens held were taken (ms). */
  takenAt: number;
  /** The bucket the tokens were taken under (the one to give them back to). */
  bucket: BucketParameters;
  /** Requests waiting for the take in flight. */
  readonly waiters: Waiter[];
  inFlight: boolean;
  /** What the take in flight asked for, once it left. */
  asked: number;
  /** Requests arriving while a take is in flight (smoothed over takes): the demand one round trip sees. */
  arrivedDuringTake: number;
  arrivals: number;
}

const DEFAULT_HOLD_MS = 100;
const DEFAULT_MAX_LEASE_SHARE = 1 / 16;
const DEFAULT_MAX_LEASE_TOKENS = 1_000;

/**
 * Requests decided against shared buckets without a round trip each, when they come faster than
 * one round trip. A request with nothing held waits for a take from the shared bucket; a take asks
 * for one token per waiting request plus, once requests have arrived while a take was in flight,
 * twice that many ahead (at most a sixteenth of the bucket and 1,000 tokens), and is sent again
 * before the tokens held run out. A request arriving one at a time (a client waiting for each
 * answer) takes exactly one token per round trip, as before.
 *
 * Nothing is admitted that was not taken from the shared bucket: every gateway replica together
 * admits at most what the bucket gives. What a replica holds is out of the others' reach until
 * spent or given back (after `holdMs`), so a tenant at its limit across replicas may see a
 * refusal while another replica holds a few of its tokens, and a replica may admit a take's
 * tokens up to `holdMs` after they were taken. The level reported is the shared level as the last
 * take left it plus what this replica holds: exact for one replica.
 */
export class LeasedBuckets {
  private readonly leases = new Map<string, Lease>();
  private readonly holdMs: number;
  private readonly maxLeaseShare: number;
  private readonly maxLeaseTokens: number;
  private readonly now: () => number;
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
  }

  take(key: string, bucket: BucketParameters): Promise<TakeOutcome> {
    let lease = this.leases.get(key);
    if (!lease) {
      lease = { held: 0, level: 0, takenAt: 0, bucket, waiters: [], inFlight: false, asked: 0, arrivedDuringTake: 0, arrivals: 0 };
      this.leases.set(key, lease);
      this.startSweeping();
    }
    if (lease.inFlight) lease.arrivals += 1;
    if (lease.held > 0 && lease.waiters.length === 0) {
      const outcome = this.spend(lease);
      // Requests came faster than a round trip: the next take leaves before these run out.
      if (lease.arrivedDuringTake > 0 && lease.held <= lease.arrivedDuringTake && !lease.inFlight) this.sendTake(key, lease, bucket);
      return Promise.resolve(outcome);
    }
    return new Promise<TakeOutcome>((resolve, reject) => {
      lease.waiters.push({ resolve, reject });
      if (!lease.inFlight) this.sendTake(key, lease, bucket);
    });
  }

  /** Tokens held by this replica for `key` (tests, diagnostics). */
  heldFor(key: string): number {
    return this.leases.get(key)?.held ?? 0;
  }

  /** Gives back what has been held longer than `holdMs`, and forgets idle keys. */
  async sweep(): Promise<void> {
    const now = this.now();
    const returns: Array<Promise<void>> = [];
    for (const [key, lease] of this.leases) {
      if (lease.inFlight || lease.waiters.length > 0 || now - lease.takenAt < this.holdMs) continue;
      if (lease.held > 0) returns.push(this.giveBack(key, lease));
      else this.leases.delete(key);
    }
    await Promise.all(returns);
    if (this.leases.size === 0) this.stopSweeping();
  }

  /** Forgets every token held without giving it back (the shared store is unreachable). */
  drop(): void {
    for (const [key, lease] of this.leases) if (!lease.inFlight && lease.waiters.length === 0) this.leases.delete(key);
    for (const lease of this.leases.values()) lease.held = 0;
    this.stopSweeping();
  }

  /** Gives back every token held (best effort) and stops. */
  async close(): Promise<void> {
    this.closed = true;
    this.stopSweeping();
    const returns = [...this.leases].filter(([, lease]) => lease.held > 0).map(([key, lease]) => this.giveBack(key, lease));
    await Promise.all(returns);
  }

  private spend(lease: Lease): TakeOutcome {
    lease.held -= 1;
    const level = Math.min(lease.bucket.capacity, lease.level + lease.held * lease.bucket.cost);
    return { allowed: true, level };
  }

  private sendTake(key: string, lease: Lease, bucket: BucketParameters): void {
    const ahead = Math.min(lease.arrivedDuringTake * 2, this.maxLeaseTokens, Math.floor(capacityInTokens(bucket) * this.maxLeaseShare));
    const wanted = (): number => {
      lease.asked = Math.max(1, lease.waiters.length - lease.held + ahead);
      return lease.asked;
    };
    lease.inFlight = true;
    lease.arrivals = 0;
    this.shared.take(key, bucket, wanted).then(
      (outcome) => this.taken(key, lease, bucket, outcome, lease.asked),
      (error: unknown) => {
        lease.inFlight = false;
        lease.arrivedDuringTake = 0;
        for (const waiter of lease.waiters.splice(0)) waiter.reject(error);
      },
    );
  }

  private taken(key: string, lease: Lease, bucket: BucketParameters, outcome: LeaseOutcome, wanted: number): void {
    lease.inFlight = false;
    // Quick to rise, halving when demand falls: one take that happened to see few arrivals does not
    // make the next one wait.
    lease.arrivedDuringTake = Math.max(lease.arrivals, Math.floor((lease.arrivedDuringTake + lease.arrivals) / 2));
    lease.level = outcome.level;
    lease.bucket = bucket;
    if (outcome.taken > 0) {
      lease.held += outcome.taken;
      lease.takenAt = this.now();
      // A take answered after drop() stopped the sweep still goes back in time.
      this.startSweeping();
    }
    // Waiters in arrival order: those the tokens cover are admitted. When the take got less than it
    // asked for, the bucket had nothing more when it answered (after they all arrived): the rest are
    // refused at that level. Otherwise they arrived after it left and get a take of their own.
    while (lease.waiters.length > 0 && lease.held > 0) (lease.waiters.shift() as Waiter).resolve(this.spend(lease));
    if (outcome.taken < wanted) for (const waiter of lease.waiters.splice(0)) waiter.resolve({ allowed: false, level: outcome.level });
    else if (lease.waiters.length > 0) this.sendTake(key, lease, bucket);
    if (this.closed && lease.held > 0) void this.giveBack(key, lease);
  }

  private giveBack(key: string, lease: Lease): Promise<void> {
    const count = lease.held;
    lease.held = 0;
    // Best effort: a give-back that fails leaves the bucket emptier than it is, never fuller.
    return this.shared.giveBack(key, lease.bucket, count).catch(() => undefined);
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
