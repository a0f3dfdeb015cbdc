import { Clock, monotonicClock } from './clock';
import { BucketParameters } from './policy';
import { BucketState, microsUntilFull, takeToken, TakeOutcome } from './token-bucket';

interface Entry {
  readonly state: BucketState;
  /** When the bucket is full again and the entry can go. */
  readonly fullAt: number;
}

export interface MemoryBucketStoreOptions {
  readonly clock?: Clock;
  /** How often buckets that have refilled are dropped; 0 turns the sweep off. */
  readonly sweepIntervalMs?: number;
}

/** Buckets in this process's memory: the embedded default and the per-replica fallback. */
export class MemoryBucketStore {
  private readonly buckets = new Map<string, Entry>();
  private readonly clock: Clock;
  private readonly sweeper?: NodeJS.Timeout;

  constructor(options: MemoryBucketStoreOptions = {}) {
    this.clock = options.clock ?? monotonicClock;
    const interval = options.sweepIntervalMs ?? 30_000;
    if (interval > 0) this.sweeper = setInterval(() => this.sweep(), interval).unref();
  }

  take(key: string, bucket: BucketParameters): TakeOutcome {
    const { outcome, state } = takeToken(this.buckets.get(key)?.state, this.clock.nowMicros(), bucket);
    if (outcome.allowed) this.buckets.set(key, { state, fullAt: state.updatedAt + microsUntilFull(state.level, bucket) });
    return outcome;
  }

  /** Drops the buckets that have refilled: a missing bucket is a full one. */
  sweep(): void {
    const now = this.clock.nowMicros();
    for (const [key, entry] of this.buckets) if (entry.fullAt <= now) this.buckets.delete(key);
  }

  get size(): number {
    return this.buckets.size;
  }

  close(): void {
    if (this.sweeper) clearInterval(this.sweeper);
    this.buckets.clear();
  }
}
