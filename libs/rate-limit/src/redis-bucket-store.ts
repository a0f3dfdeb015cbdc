import type { Redis } from 'ioredis';
import { TurnBatcher } from '@mission/contracts';
import { BucketParameters } from './policy';
import { TakeOutcome } from './token-bucket';

/**
 * takeToken() (token-bucket.ts) as one atomic script: one round trip per request, on Redis's
 * own clock so the gateways' clocks do not matter. The bucket is one string "level:updatedAt"
 * (grains, microseconds) that expires once it would have refilled, so idle tenants cost nothing.
 * Numbers stay integers below 2^53 (see bucketFor), exact in Lua's doubles; '%.0f' writes them
 * back without the exponent notation tostring() would use.
 */
export const TAKE_TOKEN_SCRIPT = `
if redis.replicate_commands then redis.replicate_commands() end
local capacity = tonumber(ARGV[1])
local cost = tonumber(ARGV[2])
local refill = tonumber(ARGV[3])
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
if level < cost then
  return {0, level}
end
level = level - cost
local full_after_ms = math.floor((capacity - level) / refill / 1000) + 1
redis.call('SET', KEYS[1], string.format('%.0f:%.0f', level, updated_at), 'PX', full_after_ms)
return {1, level}
`;

const COMMAND = 'takeRateLimitToken';

type ScriptedRedis = Redis & {
  [COMMAND](key: string, capacity: number, cost: number, refill: number): Promise<[number, number]>;
};

interface QueuedTake {
  readonly key: string;
  readonly bucket: BucketParameters;
  resolve(outcome: TakeOutcome): void;
  reject(error: unknown): void;
}

/** Takes of one turn of the event loop sent as one pipeline: at most this many. */
const MAX_TAKES_PER_PIPELINE = 128;

/**
 * Buckets in Redis, shared by every gateway replica. ioredis sends the script by its SHA
 * (EVALSHA), loading it with EVAL the first time on each connection and again after NOSCRIPT
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
    this.redis = redis as ScriptedRedis;
  }

  take(key: string, bucket: BucketParameters): Promise<TakeOutcome> {
    return new Promise<TakeOutcome>((resolve, reject) => this.batcher.add({ key, bucket, resolve, reject }));
  }

  private send(batch: QueuedTake[]): void {
    if (batch.length === 1) {
      const [only] = batch;
      this.redis[COMMAND](only.key, only.bucket.capacity, only.bucket.cost, only.bucket.refill).then((reply) => only.resolve(outcomeOf(reply)), only.reject);
      return;
    }
    const pipeline = this.redis.pipeline() as unknown as Record<typeof COMMAND, (key: string, capacity: number, cost: number, refill: number) => unknown> & {
      exec(): Promise<Array<[Error | null, unknown]> | null>;
    };
    for (const { key, bucket } of batch) pipeline[COMMAND](key, bucket.capacity, bucket.cost, bucket.refill);
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

function outcomeOf([allowed, level]: [number, number]): TakeOutcome {
  return { allowed: allowed === 1, level };
}
