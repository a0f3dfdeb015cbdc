import { PassportStrategy } from '@nestjs/passport';
import { decodeProtectedHeader } from 'jose';
import { JwksClient, JwksRateLimitError, SigningKeyNotFoundError } from 'jwks-rsa';
import type { JwtPayload } from 'jsonwebtoken';
import { ExtractJwt, Strategy } from 'passport-jwt';
import { DomainError, ErrorCode, isUuid } from '@mission/contracts';
import type { Authenticated } from './authenticated';

/**
 * Asymmetric algorithms only (an HMAC "signature" made with a public key is never accepted), as
 * far as jsonwebtoken verifies them; the identity provider signs ES256.
 */
export const ACCEPTED_ALGORITHMS = ['ES256', 'ES384', 'ES512', 'PS256', 'PS384', 'PS512', 'RS256', 'RS384', 'RS512'] as const;
export const CLOCK_TOLERANCE_SECONDS = 30;
/** RFC 9068: the `typ` of a JWT access token, so an ID token (or any other JWT of the issuer) is never taken for one. */
export const ACCESS_TOKEN_TYPE = 'at+jwt';
const REQUIRED_CLAIMS = ['exp', 'iat', 'sub', 'jti'] as const;

export class InvalidTokenError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InvalidTokenError';
  }
}

export interface JwtStrategyOptions {
  readonly issuer: string;
  readonly audience: string;
  /** The issuer's JWKS; discovered from its OpenID configuration when absent. */
  readonly jwksUri?: string;
  readonly fetchTimeoutMs?: number;
  /** Most JWKS fetches a minute, so tokens naming unknown keys cannot cause a fetch storm. */
  readonly jwksRequestsPerMinute?: number;
}

/** A failure reaching the identity provider (its metadata or keys): a 503, never a bad token. */
function unavailable(message: string): DomainError {
  return new DomainError(ErrorCode.DependencyUnavailable, message);
}

/**
 * The signing keys of the issuer, through jwks-rsa's client: cached (10 min), refetched when a
 * token names a key it does not know (a rotation), at most `jwksRequestsPerMinute` times a minute.
 */
class IssuerKeys {
  private client?: Promise<JwksClient>;
  private keysLoaded = false;

  constructor(private readonly options: JwtStrategyOptions) {}

  /** The public key (PEM) a token names, or an InvalidTokenError / a 503 DomainError. */
  async keyFor(token: string): Promise<string> {
    let header: ReturnType<typeof decodeProtectedHeader>;
    try {
      header = decodeProtectedHeader(token);
    } catch {
      throw new InvalidTokenError('The token is malformed or its signature is not valid');
    }
    if (typeof header.typ !== 'string' || header.typ.toLowerCase().replace(/^application\//, '') !== ACCESS_TOKEN_TYPE) {
      throw new InvalidTokenError(`The token is not an access token (typ ${ACCESS_TOKEN_TYPE})`);
    }
    // No header extension is understood here, so a token that marks one critical is refused (RFC 7515 §4.1.11).
    if (typeof header.alg !== 'string' || !(ACCEPTED_ALGORITHMS as readonly string[]).includes(header.alg) || header.crit !== undefined) {
      throw new InvalidTokenError('The token is malformed or its signature is not valid');
    }
    const client = await this.jwks();
    try {
      const key = (await client.getSigningKey(header.kid)).getPublicKey();
      this.keysLoaded = true;
      return key;
    } catch (error) {
      // No such key even after a refetch, or no refetch allowed yet (jwksRequestsPerMinute): the
      // token's fault. Anything else is the identity provider's (unreachable, an unreadable answer).
      if (error instanceof SigningKeyNotFoundError || error instanceof JwksRateLimitError) throw new InvalidTokenError('The token is malformed or its signature is not valid');
      throw unavailable('The identity provider is unreachable');
    }
  }

  /**
   * Whether the keys could be loaded (for readiness): once they were, yes for good, as tokens of
   * known keys keep verifying from the cache while the identity provider is briefly away.
   */
  async reachable(): Promise<boolean> {
    if (this.keysLoaded) return true;
    try {
      await (await this.jwks()).getSigningKeys();
      this.keysLoaded = true;
      return true;
    } catch {
      return false;
    }
  }

  private jwks(): Promise<JwksClient> {
    this.client ??= this.discover().catch((error: unknown) => {
      this.client = undefined;
      throw error instanceof DomainError ? error : unavailable('The identity provider is unreachable');
    });
    return this.client;
  }

  private async discover(): Promise<JwksClient> {
    const timeout = this.options.fetchTimeoutMs ?? 5_000;
    let jwksUri = this.options.jwksUri;
    if (!jwksUri) {
      const response = await fetch(`${this.options.issuer.replace(/\/$/, '')}/.well-known/openid-configuration`, { signal: AbortSignal.timeout(timeout) });
      if (!response.ok) throw unavailable('The identity provider metadata is unavailable');
      const metadata = (await response.json()) as { issuer?: string; jwks_uri?: string };
      if (metadata.issuer !== this.options.issuer || typeof metadata.jwks_uri !== 'string')
        throw unavailable('The identity provider metadata does not match the configured issuer');
      jwksUri = metadata.jwks_uri;
    }
    return new JwksClient({
      jwksUri,
      timeout,
      cache: true,
      cacheMaxAge: 10 * 60_000,
      rateLimit: true,
      jwksRequestsPerMinute: this.options.jwksRequestsPerMinute ?? 10,
    });
  }
}

/** The caller a verified payload names. */
function authenticatedOf(payload: JwtPayload): Authenticated {
  for (const claim of REQUIRED_CLAIMS) if (payload[claim] === undefined) throw new InvalidTokenError(`The token's ${claim} claim is missing`);
  const scope = typeof payload.scope === 'string' ? payload.scope : '';
  const clientId = typeof payload.client_id === 'string' ? payload.client_id : String(payload.sub);
  const tenantId: unknown = payload.tenant_id;
  if (tenantId !== undefined && !isUuid(tenantId)) throw new InvalidTokenError('The token carries a malformed tenant');
  return {
    subject: String(payload.sub),
    clientId,
    scopes: new Set(scope.split(' ').filter(Boolean)),
    tenantId: tenantId === undefined ? undefined : (tenantId as string).toLowerCase(),
    tokenId: String(payload.jti),
  };
}

/**
 * The gateway's bearer-token check: a passport-jwt strategy (registered with @nestjs/passport as
 * `jwt`) taking the token from the Authorization header only, its key from the issuer's JWKS by
 * `kid`, and checking signature, algorithm (asymmetric only), `typ` (RFC 9068), issuer, audience,
 * expiry (30 s of tolerance) and the claims an access token must carry.
 */
export class JwtStrategy extends PassportStrategy(Strategy, 'jwt') {
  private readonly keys: IssuerKeys;

  constructor(options: JwtStrategyOptions) {
    const keys = new IssuerKeys(options);
    super({
      jwtFromRequest: ExtractJwt.fromAuthHeaderAsBearerToken(),
      secretOrKeyProvider: (_request: unknown, token: string, done: (error: unknown, key?: string) => void) => {
        keys.keyFor(token).then(
          (key) => done(null, key),
          (error: unknown) => done(error),
        );
      },
      issuer: options.issuer,
      audience: options.audience,
      algorithms: [...ACCEPTED_ALGORITHMS],
      ignoreExpiration: false,
      jsonWebTokenOptions: { clockTolerance: CLOCK_TOLERANCE_SECONDS },
    });
    this.keys = keys;
  }

  validate(payload: JwtPayload): Authenticated {
    return authenticatedOf(payload);
  }

  reachable(): Promise<boolean> {
    return this.keys.reachable();
  }
}
