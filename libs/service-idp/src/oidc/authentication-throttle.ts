import { createHash, createHmac, createSecretKey, randomBytes } from 'node:crypto';
import type { RateLimiter, RateLimitPolicy } from '@mission/rate-limit';

/**
 * How many verified authentication attempts the identity provider takes per minute: for one
 * client id, for one user, and from one source address (each a token bucket: a burst of ⌈L/6⌉ + 1,
 * then L a minute). An attempt is counted before its verification runs, so guesses sent side by
 * side cannot all pass while the first ones are still being verified. Past a budget the subject or
 * source is refused at once (429 with Retry-After) until the bucket has a token again, without
 * running scrypt (about 75 ms of CPU per guess). A client whose secret was verified lately is not
 * verified again (VerifiedSecrets) and takes nothing.
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

/** An authentication's outcome: verified (valid or not), or refused before any verification. */
export type AuthenticationOutcome = { readonly valid: boolean; readonly refused?: undefined } | { readonly refused: ThrottleDecision; readonly valid?: undefined };

/** What VerificationGate.run answers when it takes no more. */
export const BUSY = Symbol('busy');

/**
 * At most `concurrency` verifications (scrypt) at once in this process and `queued` waiting in
 * each of two lanes; past that an authentication is refused at once instead of queueing. Node runs
 * scrypt on its thread pool (4 threads), which also signs tokens (WebCrypto): a flood of guesses
 * spread over many client ids and addresses, each within its budgets, never takes every thread,
 * so clients whose secret is remembered keep getting tokens at once. Subjects and sources that
 * failed lately, and further attempts at a subject already being verified, wait in the second
 * lane: a new client's first token goes ahead of the guesses at known ids.
 */
export class VerificationGate {
  private running = 0;
  private readonly lanes: { readonly first: Array<() => void>; readonly second: Array<() => void> } = { first: [], second: [] };

  constructor(
    private readonly concurrency = 2,
    private readonly queued = 32,
    /** Longest wait in a lane; past it the authentication is refused (a flood never strands a caller). */
    private readonly maxWaitMs = 5_000,
  ) {}

  async run(verify: () => Promise<boolean>, lane: 'first' | 'second' = 'first'): Promise<boolean | typeof BUSY> {
    if (this.running >= this.concurrency) {
      const waiting = this.lanes[lane];
      if (waiting.length >= this.queued) return BUSY;
      const admitted = await new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => {
          // Still waiting (a waiter that got the slot cleared this timer): leave the lane, refused.
          const at = waiting.indexOf(waiter);
          if (at >= 0) waiting.splice(at, 1);
          resolve(false);
        }, this.maxWaitMs);
        timer.unref();
        const waiter = (): void => {
          clearTimeout(timer);
          resolve(true);
        };
        waiting.push(waiter);
      });
      if (!admitted) return BUSY;
    } else {
      this.running++;
    }
    try {
      return await verify();
    } finally {
      // The slot passes straight to the next waiter, first lane first, or is given back.
      const next = this.lanes.first.shift() ?? this.lanes.second.shift();
      if (next) next();
      else this.running--;
    }
  }
}

/** How long a subject whose verification failed waits in the gate's second lane. */
const FAILED_LATELY_MS = 10 * 60_000;
/** The most subjects and sources held as blocked, or as failed lately, in one process. */
const MAX_BLOCKS = 10_000;

/** Rate-limit keys never hold an identifier as sent: its hash, prefixed by what it identifies. */
function keyOf(kind: string, value: string): string {
  return `idp:${kind}:${createHash('sha256').update(value).digest('base64url')}`;
}

/**
 * Budgets of authentication attempts, through the platform's token buckets: in memory, or shared
 * by every idp replica through Redis when REDIS_URL is set. A subject or source whose budget an
 * attempt exhausts is blocked in this replica until its bucket refills; another replica blocks it
 * at its own first attempt, which finds the shared bucket empty. Verifications run through a
 * VerificationGate, subjects and sources that failed lately in its second lane.
 */
export class AuthenticationThrottle {
  private readonly blocked = new Map<string, number>();
  /** Subjects and sources whose last verification failed, until when they wait in the gate's second lane. */
  private readonly failures = new Map<string, number>();
  /** Verifications of each subject running or waiting now. */
  private readonly verifying = new Map<string, number>();

  constructor(
    private readonly limiter: RateLimiter,
    private readonly budgets: Budgets = FAILED_AUTHENTICATION_BUDGETS,
    private readonly now: () => number = Date.now,
    private readonly gate: VerificationGate = new VerificationGate(),
  ) {}

  /** Whether an authentication of `subject` from `source` may be tried now (before any verification). */
  check(kind: 'client' | 'user', subject: string, source: string | undefined): ThrottleDecision {
    const until = Math.max(this.blockedUntil(keyOf(kind, subject)), source ? this.blockedUntil(keyOf('source', source)) : 0);
    return until === 0 ? ALLOWED : { allowed: false, retryAfterSeconds: Math.max(1, Math.ceil((until - this.now()) / 1000)) };
  }

  /**
   * Checks, counts and runs one verification of `subject` from `source`. The attempt is counted
   * before the verification runs, so guesses sent side by side cannot all pass while the first
   * ones are still being verified; it is refused without running while the subject or the source
   * is over its budget, or while the process already runs and queues as many verifications as it
   * takes (VerificationGate). A client whose secret was verified lately is not verified again
   * (VerifiedSecrets, before this is called) and so takes nothing.
   */
  async authenticate(kind: 'client' | 'user', subject: string, source: string | undefined, verify: () => Promise<boolean>): Promise<AuthenticationOutcome> {
    const admitted = this.check(kind, subject, source);
    if (!admitted.allowed) return { refused: admitted };
    const counted = await this.attempt(kind, subject, source);
    if (!counted.allowed) return { refused: counted };
    const keys = [keyOf(kind, subject), ...(source ? [keyOf('source', source)] : [])];
    // Second lane: the subject or the source failed lately, or the subject is being verified already.
    const suspect = keys.some((key) => this.failedLately(key)) || (this.verifying.get(keys[0]) ?? 0) > 0;
    this.verifying.set(keys[0], (this.verifying.get(keys[0]) ?? 0) + 1);
    let valid: boolean | typeof BUSY;
    try {
      valid = await this.gate.run(verify, suspect ? 'second' : 'first');
    } finally {
      const left = (this.verifying.get(keys[0]) ?? 1) - 1;
      if (left > 0) this.verifying.set(keys[0], left);
      else this.verifying.delete(keys[0]);
    }
    if (valid === BUSY) return { refused: { allowed: false, retryAfterSeconds: 1 } };
    if (!valid) for (const key of keys) this.remember(this.failures, key, this.now() + FAILED_LATELY_MS);
    return { valid };
  }

  /** Counts an attempt about to be verified; says whether the subject or the source is now refused, and for how long. */
  async attempt(kind: 'client' | 'user', subject: string, source: string | undefined): Promise<ThrottleDecision> {
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
    this.remember(this.blocked, key, until);
  }

  private failedLately(key: string): boolean {
    const until = this.failures.get(key);
    if (until === undefined) return false;
    if (until > this.now()) return true;
    this.failures.delete(key);
    return false;
  }

  /** Keeps `key` until `until` in a map bounded to MAX_BLOCKS entries (expired ones go first). */
  private remember(entries: Map<string, number>, key: string, until: number): void {
    if (entries.size >= MAX_BLOCKS) {
      const now = this.now();
      for (const [held, heldUntil] of entries) if (heldUntil <= now) entries.delete(held);
      if (entries.size >= MAX_BLOCKS) entries.delete(entries.keys().next().value as string);
    }
    entries.set(key, Math.max(until, entries.get(key) ?? 0));
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
  /** A random key of this process, as a KeyObject: a raw Buffer makes each createHmac try it as a KeyObject and a CryptoKey first. */
  private readonly key = createSecretKey(randomBytes(32));
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

  /** What identifies one check of a presented secret (an HMAC: never the secret). */
  fingerprint(clientId: string, storedHash: string, presented: string): string {
    return this.keyOf(clientId, storedHash, presented);
  }

  private keyOf(clientId: string, storedHash: string, presented: string): string {
    return createHmac('sha256', this.key).update(`${clientId}\u0000${storedHash}\u0000${presented}`).digest('base64url');
  }
}
