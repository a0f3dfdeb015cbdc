import { hash } from 'node:crypto';
import { decodeJwt } from 'jose';
import { DomainError } from '@mission/contracts';
import { Authenticated } from './authenticated';
import { CLOCK_TOLERANCE_SECONDS, InvalidTokenError, JwtStrategy, type JwtStrategyOptions } from './jwt.strategy';

export { ACCEPTED_ALGORITHMS, ACCESS_TOKEN_TYPE, CLOCK_TOLERANCE_SECONDS, InvalidTokenError } from './jwt.strategy';

export interface TokenVerifierOptions extends JwtStrategyOptions {
  /** Verified tokens remembered at most (default 10,000); 0 turns the memory off. */
  readonly cacheEntries?: number;
}

/** What passport-jwt (through jsonwebtoken) says of a token it refused, as our error. */
function refusal(info: unknown): Error {
  if (info instanceof InvalidTokenError || info instanceof DomainError) return info;
  const { name, message } = (info ?? {}) as { name?: string; message?: string };
  if (name === 'TokenExpiredError') return new InvalidTokenError('The token has expired');
  if (name === 'NotBeforeError') return new InvalidTokenError('The token is not valid yet');
  const claim = /^jwt (issuer|audience|subject|jwtid) invalid/.exec(message ?? '')?.[1];
  if (claim) return new InvalidTokenError(`The token's ${{ issuer: 'iss', audience: 'aud', subject: 'sub', jwtid: 'jti' }[claim]} claim is not accepted`);
  return new InvalidTokenError('The token is malformed or its signature is not valid');
}

/**
 * Runs the strategy on one token the way passport's authenticate middleware runs a strategy (an
 * object deriving from it, given the success, fail and error actions), without passport's
 * process-wide registry: every gateway of a process keeps its own issuer and audience.
 */
function runStrategy(strategy: JwtStrategy, token: string): Promise<Authenticated> {
  return new Promise((resolve, reject) => {
    const attempt = Object.create(strategy) as JwtStrategy & {
      success(user: Authenticated): void;
      fail(info?: unknown): void;
      error(error: unknown): void;
      pass(): void;
      redirect(): void;
    };
    attempt.success = (user) => resolve(user);
    attempt.fail = (info) => reject(refusal(info));
    attempt.error = (error) => reject(refusal(error));
    attempt.pass = () => reject(new InvalidTokenError('The token is malformed or its signature is not valid'));
    attempt.redirect = attempt.pass;
    attempt.authenticate({ headers: { authorization: `Bearer ${token}` } } as never, { session: false });
  });
}

/**
 * A verified token is remembered this long at most (and never past its expiry): a client sends
 * the same token for up to an hour, and checking its signature again each time is most of what
 * authenticating costs. No longer than the JWKS cache (10 min), so a key withdrawn from the JWKS
 * stops working within the same bound as without this memory.
 */
const VERIFIED_TOKEN_TTL_MS = 5 * 60_000;

interface Remembered {
  readonly auth: Authenticated;
  /** Epoch ms after which the entry is no longer used (expiry with tolerance, or the TTL). */
  readonly until: number;
}

/**
 * Verifies access tokens with the JwtStrategy (passport-jwt, keys from the issuer's JWKS), and
 * remembers the verdict for a token until shortly after it expires.
 */
export class TokenVerifier {
  /** Verified tokens by SHA-256 of the token (never the token itself), oldest first. */
  private readonly verified = new Map<string, Remembered>();
  private readonly cacheEntries: number;
  private readonly strategy: JwtStrategy;

  constructor(options: TokenVerifierOptions) {
    this.cacheEntries = options.cacheEntries ?? 10_000;
    this.strategy = new JwtStrategy(options);
  }

  /** Verifies `token`, or answers from the memory of tokens verified before (until they expire). */
  async verify(token: string): Promise<Authenticated> {
    if (this.cacheEntries === 0) return this.verifyNow(token);
    const digest = hash('sha256', token, 'base64url');
    const remembered = this.verified.get(digest);
    if (remembered && remembered.until > Date.now()) return remembered.auth;
    if (remembered) this.verified.delete(digest);
    const auth = await this.verifyNow(token);
    // Verified, so `exp` is there and a number; the memory ends where the tolerance would.
    const expiresAt = ((decodeJwt(token).exp as number) + CLOCK_TOLERANCE_SECONDS) * 1000;
    this.verified.set(digest, { auth, until: Math.min(expiresAt, Date.now() + VERIFIED_TOKEN_TTL_MS) });
    while (this.verified.size > this.cacheEntries) this.verified.delete(this.verified.keys().next().value as string);
    return auth;
  }

  private verifyNow(token: string): Promise<Authenticated> {
    return runStrategy(this.strategy, token);
  }

  /** Whether the JWKS could be loaded (for readiness). */
  reachable(): Promise<boolean> {
    return this.strategy.reachable();
  }
}
