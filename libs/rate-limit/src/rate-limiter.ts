import { Redis, RedisOptions } from 'ioredis';
import { Clock } from './clock';
import { decide, RateLimitDecision } from './decision';
import { LeasedBuckets } from './leased-buckets';
import { MemoryBucketStore } from './memory-bucket-store';
import { bucketFor, RateLimitPolicy } from './policy';
import { RedisBucketStore } from './redis-bucket-store';

/** `memory`: the embedded store; `redis`: shared by every replica; `fallback`: Redis unreachable, per-replica memory. */
export type RateLimiterMode = 'memory' | 'redis' | 'fallback';

export interface RateLimiterStatus {
  readonly mode: RateLimiterMode;
  /** Replicas the limit is divided between while the fallback serves. */
  readonly replicas: number;
  /** Since when the fallback serves (ISO 8601), during an outage. */
  readonly fallbackSince?: string;
  /** Redis outages since the start. */
  readonly outages: number;
}

export interface RateLimiter {
  start(): Promise<void>;
  /** Takes one token of `key`'s bucket under `policy`, or refuses. Never fails for want of a store. */
  consume(key: string, policy: RateLimitPolicy): Promise<RateLimitDecision>;
  status(): RateLimiterStatus;
  close(): Promise<void>;
}

export interface RateLimiterLogger {
  info(message: string, context?: Record<string, unknown>): void;
  warn(message: string, context?: Record<string, unknown>): void;
}

/** The embedded default: one process, one set of buckets in memory. */
export class MemoryRateLimiter implements RateLimiter {
  private readonly store: MemoryBucketStore;

  constructor(options: { readonly clock?: Clock; readonly sweepIntervalMs?: number } = {}) {
    this.store = new MemoryBucketStore(options);
  }

  async start(): Promise<void> {}

  async consume(key: string, policy: RateLimitPolicy): Promise<RateLimitDecision> {
    const bucket = bucketFor(policy);
    return decide(policy, bucket, this.store.take(key, bucket), 'memory');
  }

  status(): RateLimiterStatus {
    return { mode: 'memory', replicas: 1, outages: 0 };
  }

  async close(): Promise<void> {
    this.store.close();
  }
}

export interface RedisRateLimiterOptions {
  /** `redis://` or `rediss://` (TLS). */
  readonly url: string;
  /** PEM of the certificate authorities a `rediss://` server's certificate must chain to (default: the system's). */
  readonly tlsCa?: string;
  /** Gateway replicas sharing the limits: each serves limit ÷ replicas while Redis is unreachable. */
  readonly replicas: number;
  readonly logger: RateLimiterLogger;
  /** A Redis command taking longer fails, and the request is served by the fallback. */
  readonly commandTimeoutMs?: number;
  /** How long start() waits for the first connection before serving from the fallback. */
  readonly startTimeoutMs?: number;
  /** How often, during an outage, Redis is tried again. */
  readonly probeIntervalMs?: number;
  /** The fallback's clock (tests). */
  readonly clock?: Clock;
  /** Tokens taken ahead and not spent go back to Redis after this long (see LeasedBuckets). */
  readonly leaseHoldMs?: number;
  /**
   * At most this many tokens taken ahead of the requests waiting (LeasedBuckets; the part of one
   * take ahead of demand is also at most a sixteenth of the bucket). Default 0: none. Redis keeps a
   * record of what each replica holds and the bucket refills under it, so no interval of Δ seconds
   * admits more than B + r·Δ either way (README, "Rate limits"); but a record counts tokens spent
   * since its replica's last take, so near full the bucket refills later than without, and tokens
   * one replica holds are out of the others' reach until spent or given back (100–150 ms after its
   * lease's last take; a busy lease holds some for as long as it keeps taking): a burst from idle
   * at twice the limit may then be refused up to a round trip's tokens before its 10 s are over
   * (the second consequence).
   */
  readonly maxTakeAhead?: number;
  readonly onModeChange?: (mode: 'redis' | 'fallback') => void;
}

/**
 * Connection settings that keep a request's latency bounded whatever Redis does: no queueing
 * while disconnected (a command fails at once), no retries, a short command timeout.
 * ioredis keeps reconnecting in the background.
 */
export function rateLimitRedisOptions(commandTimeoutMs: number): RedisOptions {
  return {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    autoResendUnfulfilledCommands: false,
    commandTimeout: commandTimeoutMs,
    connectTimeout: 1_000,
    retryStrategy: (attempt) => Math.min(attempt * 100, 1_000),
    connectionName: 'rate-limits',
  };
}

/**
 * Buckets shared through Redis by every gateway replica; the requests of one turn for one bucket
 * share one script call, and with `maxTakeAhead` tokens are taken ahead of demand when requests
 * come faster than a round trip (LeasedBuckets), never beyond the shared bucket's bound. When Redis fails or is unreachable,
 * requests are decided at once by a bucket in this replica's memory with the limit divided by
 * the replica count, the outage is logged once, and Redis is tried again in the background
 * until it answers; then the shared buckets take over again.
 */
export class RedisRateLimiter implements RateLimiter {
  private readonly redis: Redis;
  private readonly shared: LeasedBuckets;
  private readonly local: MemoryBucketStore;
  private mode: 'redis' | 'fallback' = 'redis';
  private fallbackSince?: number;
  private outages = 0;
  private prober?: NodeJS.Timeout;
  private probing = false;
  private closed = false;

  constructor(private readonly options: RedisRateLimiterOptions) {
    if (!Number.isInteger(options.replicas) || options.replicas < 1) throw new RangeError(`replicas must be a positive integer, got ${options.replicas}`);
    const tls = options.url.startsWith('rediss:') ? { tls: { ...(options.tlsCa ? { ca: options.tlsCa } : {}), minVersion: 'TLSv1.2' as const } } : {};
    this.redis = new Redis(options.url, { ...rateLimitRedisOptions(options.commandTimeoutMs ?? 200), ...tls });
    // Failures reach us through the commands and the close event; ioredis would print the rest.
    this.redis.on('error', () => undefined);
    this.redis.on('close', () => this.fallBack(new Error('The connection to Redis closed')));
    this.redis.on('ready', () => void this.probe());
    this.shared = new LeasedBuckets(new RedisBucketStore(this.redis), { holdMs: options.leaseHoldMs, maxLeaseTokens: options.maxTakeAhead ?? 0 });
    this.local = new MemoryBucketStore({ clock: options.clock });
  }

  async start(): Promise<void> {
    const timeoutMs = this.options.startTimeoutMs ?? 2_000;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`Redis did not answer within ${timeoutMs} ms`)), timeoutMs);
    });
    try {
      await Promise.race([this.redis.connect(), timeout]);
    } catch (error) {
      this.fallBack(error);
    } finally {
      clearTimeout(timer);
    }
  }

  async consume(key: string, policy: RateLimitPolicy): Promise<RateLimitDecision> {
    if (this.mode === 'redis') {
      const bucket = bucketFor(policy);
      try {
        return decide(policy, bucket, await this.shared.take(key, bucket), 'redis');
      } catch (error) {
        this.fallBack(error);
      }
    }
    const bucket = bucketFor(policy, this.options.replicas);
    return decide(policy, bucket, this.local.take(key, bucket), 'fallback');
  }

  status(): RateLimiterStatus {
    return {
      mode: this.mode,
      replicas: this.options.replicas,
      ...(this.fallbackSince === undefined ? {} : { fallbackSince: new Date(this.fallbackSince).toISOString() }),
      outages: this.outages,
    };
  }

  /** Tries Redis once (during an outage); true when the shared buckets serve again. */
  async probe(): Promise<boolean> {
    if (this.mode === 'redis') return true;
    if (this.probing || this.closed || this.redis.status !== 'ready') return false;
    this.probing = true;
    try {
      await this.redis.ping();
    } catch {
      return false;
    } finally {
      this.probing = false;
    }
    this.recover();
    return true;
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.prober);
    // Tokens taken ahead and not spent go back (none are held during an outage).
    await this.shared.close();
    this.redis.disconnect();
    this.local.close();
  }

  private fallBack(error: unknown): void {
    if (this.mode === 'fallback' || this.closed) return;
    this.mode = 'fallback';
    this.shared.drop();
    this.fallbackSince = Date.now();
    this.outages += 1;
    this.options.logger.warn('Redis is unreachable: rate limits are served from each replica’s memory (limit ÷ replicas) until it is back', {
      error: error instanceof Error ? error.message : String(error),
      replicas: this.options.replicas,
    });
    this.prober = setInterval(() => void this.probe(), this.options.probeIntervalMs ?? 500).unref();
    this.options.onModeChange?.('fallback');
  }

  private recover(): void {
    if (this.mode === 'redis' || this.closed) return;
    clearInterval(this.prober);
    const outageMs = Date.now() - (this.fallbackSince ?? Date.now());
    this.mode = 'redis';
    this.fallbackSince = undefined;
    this.options.logger.info('Redis is reachable again: rate limits are shared again', { outageMs });
    this.options.onModeChange?.('redis');
  }
}

export interface RateLimiterOptions {
  /** Unset: buckets in this process's memory (the embedded default). */
  readonly redisUrl?: string;
  /** PEM of the CAs for a `rediss://` URL (REDIS_TLS_CA). */
  readonly redisTlsCa?: string;
  readonly replicas?: number;
  readonly logger: RateLimiterLogger;
  readonly onModeChange?: (mode: 'redis' | 'fallback') => void;
  /** See RedisRateLimiterOptions.maxTakeAhead. */
  readonly maxTakeAhead?: number;
}

export function createRateLimiter(options: RateLimiterOptions): RateLimiter {
  if (!options.redisUrl) return new MemoryRateLimiter();
  return new RedisRateLimiter({
    url: options.redisUrl,
    tlsCa: options.redisTlsCa,
    replicas: options.replicas ?? 1,
    logger: options.logger,
    onModeChange: options.onModeChange,
    maxTakeAhead: options.maxTakeAhead,
  });
}
