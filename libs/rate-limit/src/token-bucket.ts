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
 * What a take of up to n tokens did: how many it took (0: refused) and the level it left; for a
 * holder, how many of the tokens it said it held its record still counted (the rest it must drop).
 */
export interface LeaseOutcome {
  readonly taken: number;
  readonly level: number;
  readonly held?: number;
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
 * (redis-bucket-store.ts) transcribes takeSharedTokens below, which without holders' records is
 * this function; the same test vectors run against both.
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

/**
 * Tokens a holder (one lease of one gateway replica) took ahead and may still spend, as the shared
 * store records them: at most `held` tokens, until `expiresAt` (µs of the store's clock).
 */
export interface HeldRecord {
  readonly held: number;
  readonly expiresAt: number;
}

/** A bucket shared by holders that take tokens ahead: the bucket and the holders' records. */
export interface SharedBucketState {
  readonly bucket?: BucketState;
  readonly holders: ReadonlyMap<string, HeldRecord>;
}

/** Who takes or gives back, and what it says about the tokens it holds. */
export interface HolderReport {
  readonly holder: string;
  /** Tokens it holds unspent as the call leaves: it can lower its record, never raise it. */
  readonly held: number;
  /** How long its record lasts without another call (µs): it spends nothing past half of it. */
  readonly ttlMicros: number;
}

interface SettledHolders {
  readonly others: number;
  readonly mine: number;
  readonly holders: Map<string, HeldRecord>;
}

/** The records that have not expired; the reporting holder's lowered to what it says it holds. */
function settleHolders(holders: ReadonlyMap<string, HeldRecord>, now: number, report: HolderReport | undefined): SettledHolders {
  let others = 0;
  let mine = 0;
  const live = new Map<string, HeldRecord>();
  for (const [holder, record] of holders) {
    if (record.expiresAt <= now) continue;
    live.set(holder, record);
    if (holder === report?.holder) mine = Math.min(record.held, report.held);
    else others += record.held;
  }
  return { others, mine, holders: live };
}

function withRecord(holders: Map<string, HeldRecord>, report: HolderReport | undefined, held: number, now: number): Map<string, HeldRecord> {
  if (!report) return holders;
  if (held > 0) holders.set(report.holder, { held, expiresAt: now + report.ttlMicros });
  else holders.delete(report.holder);
  return holders;
}

/** The most the bucket may hold while records count `held` tokens (grains). */
function ceilingFor(bucket: BucketParameters, held: number): number {
  return Math.max(0, bucket.capacity - held * bucket.cost);
}

/**
 * The bucket refilled up to `now` under the records as they stood since it was last written: while
 * a record lived (until its expiry), the bucket refilled no higher than its capacity less what the
 * live records counted, so that the level and the tokens held never exceed the capacity together at
 * any moment, not only when the bucket is read (a record that falls later does not hand back the
 * refill its tokens held off). A missing bucket is full but for what the live records count.
 */
function refilledUnderRecords(state: BucketState | undefined, holders: ReadonlyMap<string, HeldRecord>, now: number, bucket: BucketParameters): BucketState {
  if (!state) {
    let live = 0;
    for (const record of holders.values()) if (record.expiresAt > now) live += record.held;
    return { level: ceilingFor(bucket, live), updatedAt: now };
  }
  const updatedAt = Math.max(state.updatedAt, now);
  const pending = [...holders.values()].filter((record) => record.expiresAt > state.updatedAt).sort((a, b) => a.expiresAt - b.expiresAt);
  let held = pending.reduce((sum, record) => sum + record.held, 0);
  let level = state.level;
  let at = state.updatedAt;
  for (const record of pending) {
    if (record.expiresAt >= updatedAt) break;
    level = Math.min(ceilingFor(bucket, held), level + (record.expiresAt - at) * bucket.refill);
    at = record.expiresAt;
    held -= record.held;
  }
  return { level: Math.min(ceilingFor(bucket, held), level + (updatedAt - at) * bucket.refill), updatedAt };
}

/**
 * takeTokens() for a bucket that holders take tokens ahead from. The bucket refills under the
 * records (refilledUnderRecords), so the bucket's level and every token held together never exceed
 * the capacity, and no interval of Δ admits more than B + r·Δ however the held tokens are spent.
 * Then the reporting holder's record falls to what it says it holds and lapsed records go; of the
 * tokens taken, `spending` are spent at once (the requests that waited for the take, decided now)
 * and the rest join the holder's record, which expires `ttlMicros` after this take (a holder that
 * stops, crashes or loses its connection loses what it held; it spends nothing past half of that).
 * Without a report, every token taken is spent at once. The price: a record counts tokens spent
 * since its holder's last call until the next, so near full the bucket refills later than one
 * without holders would. The Redis store's take script is this function transcribed.
 */
export function takeSharedTokens(
  state: SharedBucketState,
  now: number,
  bucket: BucketParameters,
  wanted: number,
  report?: HolderReport & { readonly spending: number },
): { readonly outcome: LeaseOutcome; readonly state: SharedBucketState } {
  const current = refilledUnderRecords(state.bucket, state.holders, now, bucket);
  const { mine, holders } = settleHolders(state.holders, now, report);
  const taken = Math.min(wanted, Math.floor(current.level / bucket.cost));
  const level = taken > 0 ? current.level - taken * bucket.cost : current.level;
  const kept = mine + taken - Math.min(taken, report?.spending ?? taken);
  // A take that changes nothing need not be written; one under records always is (what they held off stays off).
  const written = taken > 0 || state.holders.size > 0;
  return {
    outcome: report ? { taken, level, held: mine } : { taken, level },
    state: { bucket: written ? { level, updatedAt: current.updatedAt } : state.bucket, holders: withRecord(holders, report, kept, now) },
  };
}

/**
 * returnTokens() for such a bucket: refilled under the records, then `count` tokens the holder held
 * go back, never beyond the capacity less what the records then count; the holder's record becomes
 * what it still holds.
 */
export function returnSharedTokens(state: SharedBucketState, now: number, bucket: BucketParameters, count: number, report: HolderReport): SharedBucketState {
  const current = refilledUnderRecords(state.bucket, state.holders, now, bucket);
  const { others, mine, holders } = settleHolders(state.holders, now, report);
  const level = Math.min(ceilingFor(bucket, others + mine), current.level + count * bucket.cost);
  return { bucket: level >= bucket.capacity ? undefined : { level, updatedAt: current.updatedAt }, holders: withRecord(holders, report, mine, now) };
}
