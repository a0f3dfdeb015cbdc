import { BucketParameters, RateLimitPolicy, WINDOW_SECONDS } from './policy';
import { readBucket, TakeOutcome } from './token-bucket';

/** Where a decision was made: the embedded memory store, Redis, or the per-replica fallback. */
export type DecisionStore = 'memory' | 'redis' | 'fallback';

export interface RateLimitDecision {
  readonly allowed: boolean;
  readonly policy: RateLimitPolicy;
  /** Whole tokens left. */
  readonly remaining: number;
  /** Seconds until the bucket is full, or until the next token when it is empty. */
  readonly resetSeconds: number;
  /** When refused: whole seconds after which a retry is admitted (never before the next token). */
  readonly retryAfterSeconds: number;
  readonly store: DecisionStore;
}

export function decide(policy: RateLimitPolicy, bucket: BucketParameters, outcome: TakeOutcome, store: DecisionStore): RateLimitDecision {
  const reading = readBucket(outcome.level, bucket);
  return {
    allowed: outcome.allowed,
    policy,
    remaining: reading.remaining,
    resetSeconds: reading.resetSeconds,
    retryAfterSeconds: outcome.allowed ? 0 : reading.nextTokenSeconds,
    store,
  };
}

/** An sf-string (RFC 9651): quoted, with `\` and `"` escaped. */
function structuredString(value: string): string {
  return `"${value.replace(/[\\"]/g, (character) => `\\${character}`)}"`;
}

/**
 * The RateLimit-Policy and RateLimit fields of draft-ietf-httpapi-ratelimit-headers-11:
 * `RateLimit-Policy: "<name>";q=<limit>;w=60` and `RateLimit: "<name>";r=<remaining>;t=<reset>`.
 */
export function rateLimitHeaders(decision: RateLimitDecision): Record<'RateLimit-Policy' | 'RateLimit', string> {
  const name = structuredString(decision.policy.name);
  return {
    'RateLimit-Policy': `${name};q=${decision.policy.limit};w=${WINDOW_SECONDS}`,
    RateLimit: `${name};r=${decision.remaining};t=${decision.resetSeconds}`,
  };
}
