import type { Redis } from 'ioredis';
import { TurnBatcher } from '@mission/contracts';
import { BucketParameters } from './policy';
import type { TakeRequest, TokenHolder } from './leased-buckets';
import { LeaseOutcome } from './token-bucket';

/**
 * The start of both scripts: refilledUnderRecords() and settleHolders() (token-bucket.ts) on Redis's
 * own clock, so the gateways' clocks do not matter. KEYS[1], the bucket, is one string
 * "level:updatedAt" (grains, microseconds) that expires once it would have refilled, so idle tenants
 * cost nothing. KEYS[2] is a hash of the tokens holders took ahead, "held:expiresAt" per holder,
 * expiring with its last record; while a record lives the bucket refills no higher than its
 * capacity less what the live records count. Numbers stay integers below 2^53 (see bucketFor),
 * exact in Lua's doubles; '%.0f' writes them back without the exponent notation tostring() would
 * use. ARGV: capacity, cost, refill, a count of tokens, the holder ('' for none), the tokens it says
 * it holds, the tokens of this take spent at once, and its record's lifetime (µs).
 */
const SETTLED_BUCKET = `
if redis.replicate_commands then redis.replicate_commands() end
local capacity = tonumber(ARGV[1])
local cost = tonumber(ARGV[2])
local refill = tonumber(ARGV[3])
local count = tonumber(ARGV[4])
local holder = ARGV[5]
local reported = tonumber(ARGV[6])
local spending = tonumber(ARGV[7])
local ttl = tonumber(ARGV[8])
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local function ceiling_for(held)
  return math.max(0, capacity - held * cost)
end
local records = {}
local fields = redis.call('HGETALL', KEYS[2])
for i = 1, #fields, 2 do
  local record = fields[i + 1]
  local separator = string.find(record, ':', 1, true)
  records[#records + 1] = {fields[i], tonumber(string.sub(record, 1, separator - 1)), tonumber(string.sub(record, separator + 1))}
end
local level
local updated_at = now
local stored = redis.call('GET', KEYS[1])
if stored then
  local separator = string.find(stored, ':', 1, true)
  level = tonumber(string.sub(stored, 1, separator - 1))
  local at = tonumber(string.sub(stored, separator + 1))
  updated_at = math.max(at, now)
  local pending = {}
  local held = 0
  for _, record in ipairs(records) do
    if record[3] > at then
      pending[#pending + 1] = record
      held = held + record[2]
    end
  end
  table.sort(pending, function(a, b) return a[3] < b[3] end)
  for _, record in ipairs(pending) do
    if record[3] >= updated_at then break end
    level = math.min(ceiling_for(held), level + (record[3] - at) * refill)
    at = record[3]
    held = held - record[2]
  end
  level = math.min(ceiling_for(held), level + (updated_at - at) * refill)
else
  local live = 0
  for _, record in ipairs(records) do
    if record[3] > now then live = live + record[2] end
  end
  level = ceiling_for(live)
end
local others = 0
local mine = 0
local recorded = false
local latest = 0
for _, record in ipairs(records) do
  if record[3] <= now then
    redis.call('HDEL', KEYS[2], record[1])
  elseif record[1] == holder then
    mine = math.min(record[2], reported)
    recorded = true
  else
    others = others + record[2]
    latest = math.max(latest, record[3])
  end
end
`;

/** Writes the holder's record (what it holds now: `kept`), the hash lasting as long as its last record. */
const STORE_RECORD = `
if holder ~= '' then
  if kept > 0 then
    latest = math.max(latest, now + ttl)
    redis.call('HSET', KEYS[2], holder, string.format('%.0f:%.0f', kept, now + ttl))
    redis.call('PEXPIRE', KEYS[2], math.floor((latest - now) / 1000) + 1)
  elseif recorded then
    redis.call('HDEL', KEYS[2], holder)
  end
end
`;

/**
 * Writes the bucket back, expiring once it would be full again and every live record has lapsed
 * (gone when it is full). The records' hash lives as long as the bucket: a record that lapsed still
 * held the bucket down until its expiry, and the next call's refill must see it.
 */
const STORE_BUCKET = `
if level >= capacity then
  redis.call('DEL', KEYS[1])
else
  local full_after_ms = math.floor((capacity - level) / refill / 1000) + 1
  if latest > now then
    full_after_ms = full_after_ms + math.floor((latest - now) / 1000) + 1
    redis.call('PEXPIRE', KEYS[2], full_after_ms)
  end
  redis.call('SET', KEYS[1], string.format('%.0f:%.0f', level, updated_at), 'PX', full_after_ms)
end
`;

/** takeSharedTokens() (token-bucket.ts) as one atomic script: up to ARGV[4] tokens; the reply is {taken, level, held}. */
export const TAKE_TOKEN_SCRIPT = `${SETTLED_BUCKET}
local taken = math.min(count, math.floor(level / cost))
if taken >= 1 then
  level = level - taken * cost
else
  taken = 0
end
local kept = mine + taken - math.min(taken, spending)
${STORE_RECORD}
if taken >= 1 or #records > 0 then
  ${STORE_BUCKET}
end
return {taken, level, mine}
`;

/**
 * returnSharedTokens() (token-bucket.ts) as one atomic script: ARGV[4] tokens taken earlier and
 * not spent go back, never beyond the capacity less what the records then count.
 */
export const RETURN_TOKENS_SCRIPT = `${SETTLED_BUCKET}
level = math.min(ceiling_for(others + mine), level + count * cost)
local kept = mine
${STORE_RECORD}
${STORE_BUCKET}
return 1
`;

const COMMAND = 'takeRateLimitTokens';
const RETURN_COMMAND = 'returnRateLimitTokens';

type ScriptArguments = [
  bucketKey: string,
  holdersKey: string,
  capacity: number,
  cost: number,
  refill: number,
  count: number,
  holder: string,
  held: number,
  spending: number,
  ttlMicros: number,
];

type ScriptedRedis = Redis & {
  [COMMAND](...args: ScriptArguments): Promise<[number, number, number]>;
  [RETURN_COMMAND](...args: ScriptArguments): Promise<number>;
};

interface QueuedTake {
  readonly key: string;
  readonly bucket: BucketParameters;
  /** How many tokens, asked when the pipeline leaves. */
  readonly ask: number | (() => number | TakeRequest);
  readonly holder?: TokenHolder;
  resolve(outcome: LeaseOutcome): void;
  reject(error: unknown): void;
}

/** Takes of one turn of the event loop sent as one pipeline: at most this many. */
const MAX_TAKES_PER_PIPELINE = 128;

/** The hash of the tokens holders took ahead from the bucket at `key`. */
export function holdersKeyOf(key: string): string {
  return `${key}:held`;
}

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
    if (!(COMMAND in redis)) redis.defineCommand(COMMAND, { numberOfKeys: 2, lua: TAKE_TOKEN_SCRIPT });
    if (!(RETURN_COMMAND in redis)) redis.defineCommand(RETURN_COMMAND, { numberOfKeys: 2, lua: RETURN_TOKENS_SCRIPT });
    this.redis = redis as ScriptedRedis;
  }

  /**
   * Takes up to `wanted` tokens (at least one) of `key`'s bucket: as many as it holds. A function
   * is asked when the take leaves (at the end of the turn), so that what arrives until then counts.
   * A holder's take keeps the tokens not spent at once on its record (see takeSharedTokens).
   */
  take(key: string, bucket: BucketParameters, wanted: number | (() => number | TakeRequest) = 1, holder?: TokenHolder): Promise<LeaseOutcome> {
    return new Promise<LeaseOutcome>((resolve, reject) => this.batcher.add({ key, bucket, ask: wanted, holder, resolve, reject }));
  }

  /**
   * Puts back `count` tokens taken earlier and not spent (never beyond the bucket's capacity less
   * what other holders hold); the holder's record goes.
   */
  async giveBack(key: string, bucket: BucketParameters, count: number, holder?: TokenHolder): Promise<void> {
    if (!Number.isInteger(count) || count < 0) throw new RangeError(`count must be a non-negative integer, got ${count}`);
    await this.redis[RETURN_COMMAND](...argumentsOf(key, bucket, count, holder, 0, 0));
  }

  private send(queued: QueuedTake[]): void {
    const batch: Array<QueuedTake & { readonly args: ScriptArguments }> = [];
    for (const take of queued) {
      const asked = typeof take.ask === 'number' ? take.ask : take.ask();
      const request = typeof asked === 'number' ? { wanted: asked } : asked;
      const { wanted, held = 0, spending = wanted } = request;
      if (Number.isInteger(wanted) && wanted >= 1 && Number.isInteger(held) && held >= 0 && Number.isInteger(spending) && spending >= 0) {
        batch.push({ ...take, args: argumentsOf(take.key, take.bucket, wanted, take.holder, held, spending) });
      } else take.reject(new RangeError(`A take wants a positive integer of tokens, got ${JSON.stringify(request)}`));
    }
    if (batch.length === 0) return;
    if (batch.length === 1) {
      const [only] = batch;
      this.redis[COMMAND](...only.args).then((reply) => only.resolve(outcomeOf(reply, only.holder)), only.reject);
      return;
    }
    const pipeline = this.redis.pipeline() as unknown as Record<typeof COMMAND, (...args: ScriptArguments) => unknown> & {
      exec(): Promise<Array<[Error | null, unknown]> | null>;
    };
    for (const { args } of batch) pipeline[COMMAND](...args);
    pipeline.exec().then(
      (replies) =>
        batch.forEach((take, index) => {
          const [error, reply] = replies?.[index] ?? [new Error('Redis answered the pipeline without this command'), undefined];
          if (error) take.reject(error);
          else take.resolve(outcomeOf(reply as [number, number, number], take.holder));
        }),
      (error: unknown) => batch.forEach((take) => take.reject(error)),
    );
  }
}

function argumentsOf(key: string, bucket: BucketParameters, count: number, holder: TokenHolder | undefined, held: number, spending: number): ScriptArguments {
  const ttlMicros = holder ? Math.max(1, Math.round(holder.ttlMs * 1_000)) : 0;
  return [key, holdersKeyOf(key), bucket.capacity, bucket.cost, bucket.refill, count, holder?.id ?? '', held, spending, ttlMicros];
}

function outcomeOf([taken, level, held]: [number, number, number], holder: TokenHolder | undefined): LeaseOutcome {
  return holder ? { taken, level, held } : { taken, level };
}
