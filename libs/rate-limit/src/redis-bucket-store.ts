import type { Redis } from 'ioredis';
import { TurnBatcher } from '@mission/contracts';
import { BucketParameters } from './policy';
import { LeaseOutcome } from './token-bucket';

/**
 * The start of both scripts: refilled() (token-bucket.ts) on Redis's own clock, so the gateways'
 * clocks do not matter. The bucket is one string "level:updatedAt" (grains, microseconds) that
 * expires once it would have refilled, so idle tenants cost nothing. Numbers stay integers below
 * 2^53 (see bucketFor), exact in Lua's doubles; '%.0f' writes them back without the exponent
 * notation tostring() would use. ARGV: capacity, cost, refill, and a count of tokens.
 */
const REFILLED_BUCKET = `
if redis.replicate_commands then redis.replicate_commands() end
local capacity = tonumber(ARGV[1])
local cost = tonumber(ARGV[2])
local refill = tonumber(ARGV[3])
local count = tonumber(ARGV[4])
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local level = capacity
local updated_at = now
local stored = redis.call('GET', KEYS[1])
if stored then
  local separator = string.find(stored, ':', 1, true)
  local stored_level = tonumber(string.sub(stored, 1, separator - 1))
  local stored_at = tonumber(string.sub(stored, separator + 1))
  updated_at = math.max(stored_at, now)
  level = math.min(capacity, stored_level + (updated_at - stored_at) * refill)
end
`;

/** Writes the bucket back, expiring once it would be full again. */
const STORE_BUCKET = `
local full_after_ms = math.floor((capacity - level) / refill / 1000) + 1
redis.call('SET', KEYS[1], string.format('%.0f:%.0f', level, updated_at), 'PX', full_after_ms)
`;

/** takeTokens() (token-bucket.ts) as one atomic script: up to ARGV[4] tokens; the reply is {taken, level}. */
export const TAKE_TOKEN_SCRIPT = `${REFILLED_BUCKET}
local taken = math.min(count, math.floor(level / cost))
if taken < 1 then
  return {0, level}
end
level = level - taken * cost
${STORE_BUCKET}
return {taken, level}
`;

/**
 * returnTokens() (token-bucket.ts) as one atomic script: ARGV[4] tokens taken earlier and not
 * spent go back, never beyond the capacity. A bucket that has expired was full: nothing to do.
 */
export const RETURN_TOKENS_SCRIPT = `${REFILLED_BUCKET}
if not stored then
  return 0
end
level = math.min(capacity, level + count * cost)
if level >= capacity then
  redis.call('DEL', KEYS[1])
  return 1
end
${STORE_BUCKET}
return 1
`;

const COMMAND = 'takeRateLimitTokens';
const RETURN_COMMAND = 'returnRateLimitTokens';

type ScriptArguments = [key: string, capacity: number, cost: number, refill: number, count: number];

type ScriptedRedis = Redis & {
  [COMMAND](...args: ScriptArguments): Promise<[number, number]>;
  [RETURN_COMMAND](...args: ScriptArguments): Promise<number>;
};

interface QueuedTake {
  readonly key: string;
  readonly bucket: BucketParameters;
  /** How many tokens, asked when the pipeline leaves. */
  readonly wanted: number | (() => number);
  resolve(outcome: LeaseOutcome): void;
  reject(error: unknown): void;
}

/** Takes of one turn of the event loop sent as one pipeline: at most this many. */
const MAX_TAKES_PER_PIPELINE = 128;

/**
 * Buckets in Redis, shared by every gateway replica. ioredis sends the scripts by their SHA
 * (EVALSHA), loading them with EVAL the first time on each connection and again after NOSCRIPT
 * (a restarted or flushed Redis). The takes asked for in one turn of the event loop (requests
 * that arrived on different sockets together) go out as one pipeline, one write: under load a
 * gateway writes to Redis a few times a millisecond instead of once per request. Each take is
 * still its own atomic script with its own outcome.
 */
export class RedisBucketStore {
  private readonly redis: ScriptedRedis;
  // Traced under the first request of the turn: the pipeline carries command names and hashed
  // keys only, and a trace of a request should show its rate-limit check.
  private readonly batcher = new TurnBatcher<QueuedTake>(MAX_TAKES_PER_PIPELINE, (batch) => this.send(batch), { firstCallerContext: true });

  constructor(redis: Redis) {
    if (!(COMMAND in redis)) redis.defineCommand(COMMAND, { numberOfKeys: 1, lua: TAKE_TOKEN_SCRIPT });
    if (!(RETURN_COMMAND in redis)) redis.defineCommand(RETURN_COMMAND, { numberOfKeys: 1, lua: RETURN_TOKENS_SCRIPT });
    this.redis = redis as ScriptedRedis;
  }

  /**
   * Takes up to `wanted` tokens (at least one) of `key`'s bucket: as many as it holds. A function
   * is asked when the take leaves (at the end of the turn), so that what arrives until then counts.
   */
  take(key: string, bucket: BucketParameters, wanted: number | (() => number) = 1): Promise<LeaseOutcome> {
    return new Promise<LeaseOutcome>((resolve, reject) => this.batcher.add({ key, bucket, wanted, resolve, reject }));
  }

  /** Puts back `count` tokens taken earlier and not spent (never beyond the bucket's capacity). */
  async giveBack(key: string, bucket: BucketParameters, count: number): Promise<void> {
    if (!Number.isInteger(count) || count < 1) throw new RangeError(`count must be a positive integer, got ${count}`);
    await this.redis[RETURN_COMMAND](key, bucket.capacity, bucket.cost, bucket.refill, count);
  }

  private send(queued: QueuedTake[]): void {
    const batch: Array<QueuedTake & { readonly count: number }> = [];
    for (const take of queued) {
      const count = typeof take.wanted === 'number' ? take.wanted : take.wanted();
      if (Number.isInteger(count) && count >= 1) batch.push({ ...take, count });
      else take.reject(new RangeError(`A take wants a positive integer of tokens, got ${count}`));
    }
    if (batch.length === 0) return;
    if (batch.length === 1) {
      const [only] = batch;
      this.redis[COMMAND](only.key, only.bucket.capacity, only.bucket.cost, only.bucket.refill, only.count).then((reply) => only.resolve(outcomeOf(reply)), only.reject);
      return;
    }
    const pipeline = this.redis.pipeline() as unknown as Record<typeof COMMAND, (...args: ScriptArguments) => unknown> & {
      exec(): Promise<Array<[Error | null, unknown]> | null>;
    };
    for (const { key, bucket, count } of batch) pipeline[COMMAND](key, bucket.capacity, bucket.cost, bucket.refill, count);
    pipeline.exec().then(
      (replies) =>
        batch.forEach((take, index) => {
          const [error, reply] = replies?.[index] ?? [new Error('Redis answered the pipeline without this command'), undefined];
          if (error) take.reject(error);
          else take.resolve(outcomeOf(reply as [number, number]));
        }),
      (error: unknown) => batch.forEach((take) => take.reject(error)),
    );
  }
}

function outcomeOf([taken, level]: [number, number]): LeaseOutcome {
  return { taken, level };
}
