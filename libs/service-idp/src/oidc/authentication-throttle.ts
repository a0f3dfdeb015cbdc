import { createHash, createHmac, randomBytes } from 'node:crypto';
import type { RateLimiter, RateLimitPolicy } from '@mission/rate-limit';

/**
 * How many failed authentications the identity provider takes per minute: for one client id, for
 * one user, and from one source address (each a token bucket: a burst of ⌈L/6⌉ + 1, then L a
 * minute). Past a budget the subject or source is refused at once (429 with Retry-After) until
 * the bucket has a token again, without running scrypt (about 75 ms of CPU per guess): wrong
 * secrets sent for one client neither guess on nor slow every other tenant's token requests.
 * Successful authentications take nothing.
 */
export const FAILED_AUTHENTICATION_BUDGETS = {
  client: { name: 'failed-client-authentication', limit: 30 },
  user: { name: 'failed-sign-in', limit: 10 },
  source: { name: 'failed-authentication-source', limit: 300 },
} as const satisfies Record<string, RateLimitPolicy>;

type Budgets = Record<keyof typeof FAILED_AUTHENTICATION_BUDGETS, RateLimitPolicy>;

export interface ThrottleDecision {
  readonly allowed: boolean;
  /** Whole seconds to wait when refused. */
  readonly retryAfterSeconds: number;
}

const ALLOWED: ThrottleDecision = { allowed: true, retryAfterSeconds: 0 };
const MAX_BLOCKS = 10_000;

/** Rate-limit keys never hold an identifier as sent: its hash, prefixed by what it identifies. */
function keyOf(kind: string, value: string): string {
  return `idp:${kind}:${createHash('sha256').update(value).digest('base64url')}`;
}

/**
 * Budgets of failed authentications, through the platform's token buckets: in memory, or shared
 * by every idp replica through Redis when REDIS_URL is set. A subject or source whose budget a
 * failure exhausts is blocked in this replica until its bucket refills; another replica blocks it
 * at its own first failure, which finds the shared bucket empty.
 */
export class AuthenticationThrottle {
  private readonly blocked = new Map<string, number>();

  constructor(
    private readonly limiter: RateLimiter,
    private readonly budgets: Budgets = FAILED_AUTHENTICATION_BUDGETS,
    private readonly now: () => number = Date.now,
  ) {}

  /** Whether an authentication of `subject` from `source` may be tried now (before any verification). */
  check(kind: 'client' | 'user', subject: string, source: string | undefined): ThrottleDecision {
    const until = Math.max(this.blockedUntil(keyOf(kind, subject)), source ? this.blockedUntil(keyOf('source', source)) : 0);
    return until === 0 ? ALLOWED : { allowed: false, retryAfterSeconds: Math.max(1, Math.ceil((until - this.now()) / 1000)) };
  }

  /** Counts a failed authentication; says whether the subject or the source is now refused, and for how long. */
  async failed(kind: 'client' | 'user', subject: string, source: string | undefined): Promise<ThrottleDecision> {
    const keys = [{ key: keyOf(kind, subject), policy: this.budgets[kind] }, ...(source ? [{ key: keyOf('source', source), policy: this.budgets.source }] : [])];
    const decisions = await Promise.all(keys.map(({ key, policy }) => this.limiter.consume(key, policy)));
    let longest = 0;
    decisions.forEach((decision, index) => {
      if (decision.allowed) return;
      const seconds = Math.max(1, decision.retryAfterSeconds);
      this.block(keys[index].key, this.now() + seconds * 1000);
      longest = Math.max(longest, seconds);
    });
    return longest === 0 ? ALLOWED : { allowed: false, retryAfterSeconds: longest };
  }

  private blockedUntil(key: string): number {
    const until = this.blocked.get(key);
    if (until === undefined) return 0;
    if (until > this.now()) return until;
    this.blocked.delete(key);
    return 0;
  }

  private block(key: string, until: number): void {
    if (this.blocked.size >= MAX_BLOCKS) {
      const now = this.now();
      for (const [blockedKey, blockedUntil] of this.blocked) if (blockedUntil <= now) this.blocked.delete(blockedKey);
      if (this.blocked.size >= MAX_BLOCKS) this.blocked.delete(this.blocked.keys().next().value as string);
    }
    this.blocked.set(key, Math.max(until, this.blocked.get(key) ?? 0));
  }
}

/**
 * Client secrets verified lately, so that a well-behaved client does not pay scrypt on every
 * token request, and keeps getting tokens while someone guesses at its client id (the throttle
 * refuses unverified attempts then). Each use extends the entry: a client that authenticated in
 * the last hour on this replica is never throttled. Keyed by an HMAC (under a key of this
 * process) of the client id, its stored hash and the presented secret: never the secret; a
 * rotated secret has another stored hash, a deleted client is never looked up.
 */
export class VerifiedSecrets {
  private readonly key = randomBytes(32);
  private readonly verified = new Map<string, number>();

  constructor(
    private readonly ttlMs = 60 * 60_000,
    private readonly maxEntries = 10_000,
    private readonly now: () => number = Date.now,
  ) {}

  has(clientId: string, storedHash: string, presented: string): boolean {
    const key = this.keyOf(clientId, storedHash, presented);
    const until = this.verified.get(key);
    if (until === undefined) return false;
    if (until <= this.now()) {
      this.verified.delete(key);
      return false;
    }
    this.verified.set(key, this.now() + this.ttlMs);
    return true;
  }

  remember(clientId: string, storedHash: string, presented: string): void {
    if (this.verified.size >= this.maxEntries) this.verified.clear();
    this.verified.set(this.keyOf(clientId, storedHash, presented), this.now() + this.ttlMs);
  }

  private keyOf(clientId: string, storedHash: string, presented: string): string {
    return createHmac('sha256', this.key).update(`${clientId}\u0000${storedHash}\u0000${presented}`).digest('base64url');
  }
}
