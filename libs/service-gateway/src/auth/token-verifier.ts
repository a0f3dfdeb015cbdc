import { createHash } from 'node:crypto';
import { createRemoteJWKSet, decodeJwt, errors as joseErrors, JWTPayload, jwtVerify } from 'jose';
import { DomainError, ErrorCode, isUuid } from '@mission/contracts';
import { Authenticated } from './authenticated';

/** Asymmetric algorithms only: an HMAC "signature" made with a public key is never accepted. */
export const ACCEPTED_ALGORITHMS = ['ES256', 'ES384', 'ES512', 'PS256', 'PS384', 'PS512', 'RS256', 'RS384', 'RS512', 'EdDSA', 'Ed25519'];
export const CLOCK_TOLERANCE_SECONDS = 30;

export class InvalidTokenError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InvalidTokenError';
  }
}

type KeySet = ReturnType<typeof createRemoteJWKSet>;

export interface TokenVerifierOptions {
  readonly issuer: string;
  readonly audience: string;
  readonly jwksUri?: string;
  readonly fetchTimeoutMs?: number;
  /** Least time between two JWKS fetches, so tokens naming unknown keys cannot cause a fetch storm. */
  readonly jwksCooldownMs?: number;
  /** Verified tokens remembered at most (default 10,000); 0 turns the memory off. */
  readonly cacheEntries?: number;
  /** Clock for the memory of verified tokens (tests). */
  readonly now?: () => number;
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
 * Verifies access tokens against the issuer's JWKS: signature, issuer, audience, algorithm,
 * expiry with bounded skew. The JWKS is cached and refetched (rate-limited by jose's cooldown)
 * when a token names an unknown key.
 */
export class TokenVerifier {
  private keySet?: Promise<KeySet>;
  /** Verified tokens by SHA-256 of the token (never the token itself), oldest first. */
  private readonly verified = new Map<string, Remembered>();
  private readonly cacheEntries: number;
  private readonly now: () => number;

  constructor(private readonly options: TokenVerifierOptions) {
    this.cacheEntries = options.cacheEntries ?? 10_000;
    this.now = options.now ?? Date.now;
  }

  /** Verifies `token`, or answers from the memory of tokens verified before (until they expire). */
  async verify(token: string): Promise<Authenticated> {
    if (this.cacheEntries === 0) return this.verifyNow(token);
    const digest = createHash('sha256').update(token).digest('base64url');
    const remembered = this.verified.get(digest);
    if (remembered && remembered.until > this.now()) return remembered.auth;
    if (remembered) this.verified.delete(digest);
    const auth = await this.verifyNow(token);
    // Verified, so `exp` is there and a number; the memory ends where the tolerance would.
    const expiresAt = ((decodeJwt(token).exp as number) + CLOCK_TOLERANCE_SECONDS) * 1000;
    this.verified.set(digest, { auth, until: Math.min(expiresAt, this.now() + VERIFIED_TOKEN_TTL_MS) });
    while (this.verified.size > this.cacheEntries) this.verified.delete(this.verified.keys().next().value as string);
    return auth;
  }

  private async verifyNow(token: string): Promise<Authenticated> {
    const keys = await this.keys();
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, keys, {
        issuer: this.options.issuer,
        audience: this.options.audience,
        algorithms: ACCEPTED_ALGORITHMS,
        clockTolerance: CLOCK_TOLERANCE_SECONDS,
        requiredClaims: ['exp', 'iat', 'sub', 'jti'],
        currentDate: new Date(this.now()),
      }));
    } catch (error) {
      throw this.classify(error);
    }
    return this.toAuthenticated(payload);
  }

  /** Whether the JWKS could be loaded (for readiness). */
  async reachable(): Promise<boolean> {
    try {
      await this.keys();
      return true;
    } catch {
      return false;
    }
  }

  private toAuthenticated(payload: JWTPayload): Authenticated {
    const scope = typeof payload.scope === 'string' ? payload.scope : '';
    const clientId = typeof payload.client_id === 'string' ? payload.client_id : String(payload.sub);
    const tenantId = payload.tenant_id;
    if (tenantId !== undefined && !isUuid(tenantId)) throw new InvalidTokenError('The token carries a malformed tenant');
    return {
      subject: String(payload.sub),
      clientId,
      scopes: new Set(scope.split(' ').filter(Boolean)),
      tenantId: tenantId === undefined ? undefined : tenantId.toLowerCase(),
      tokenId: String(payload.jti),
    };
  }

  private classify(error: unknown): Error {
    if (error instanceof joseErrors.JWKSTimeout) return new DomainError(ErrorCode.DependencyUnavailable, 'The identity provider did not answer in time');
    if (error instanceof joseErrors.JWTExpired) return new InvalidTokenError('The token has expired');
    if (error instanceof joseErrors.JWTClaimValidationFailed) return new InvalidTokenError(`The token's ${error.claim} claim is not accepted`);
    if (error instanceof joseErrors.JOSEError) return new InvalidTokenError('The token is malformed or its signature is not valid');
    if (error instanceof TypeError && /fetch|network|ECONNREFUSED/i.test(error.message)) {
      return new DomainError(ErrorCode.DependencyUnavailable, 'The identity provider is unreachable');
    }
    return new InvalidTokenError('The token is malformed or its signature is not valid');
  }

  private keys(): Promise<KeySet> {
    this.keySet ??= this.discover().catch((error: unknown) => {
      this.keySet = undefined;
      throw error instanceof DomainError ? error : new DomainError(ErrorCode.DependencyUnavailable, 'The identity provider is unreachable');
    });
    return this.keySet;
  }

  private async discover(): Promise<KeySet> {
    const timeoutDuration = this.options.fetchTimeoutMs ?? 5_000;
    let jwksUri = this.options.jwksUri;
    if (!jwksUri) {
      const response = await fetch(`${this.options.issuer.replace(/\/$/, '')}/.well-known/openid-configuration`, {
        signal: AbortSignal.timeout(timeoutDuration),
      });
      if (!response.ok) throw new DomainError(ErrorCode.DependencyUnavailable, 'The identity provider metadata is unavailable');
      const metadata = (await response.json()) as { issuer?: string; jwks_uri?: string };
      if (metadata.issuer !== this.options.issuer || typeof metadata.jwks_uri !== 'string') {
        throw new DomainError(ErrorCode.DependencyUnavailable, 'The identity provider metadata does not match the configured issuer');
      }
      jwksUri = metadata.jwks_uri;
    }
    return createRemoteJWKSet(new URL(jwksUri), { timeoutDuration, cooldownDuration: this.options.jwksCooldownMs ?? 30_000, cacheMaxAge: 10 * 60_000 });
  }
}
