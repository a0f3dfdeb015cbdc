import { PassportStrategy } from '@nestjs/passport';
import { KeyObject } from 'node:crypto';
import { createRemoteJWKSet, decodeProtectedHeader, errors as joseErrors } from 'jose';
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
  /** Least time between two fetches of the key set for a `kid` it does not hold (default 30 s). */
  readonly jwksCooldownMs?: number;
}

/** A failure reaching the identity provider (its metadata or keys): a 503, never a bad token. */
function unavailable(message: string): DomainError {
  return new DomainError(ErrorCode.DependencyUnavailable, message);
}

type RemoteKeySet = ReturnType<typeof createRemoteJWKSet>;

/**
 * The signing keys of the issuer, through jose's remote JWK set: the whole set cached (10 min at
 * most, then fetched again on the next use, so keys the identity provider publishes ahead of
 * signing with them are known before they sign), and fetched again for a `kid` it does not hold
 * at most once per `jwksCooldownMs` (30 s): tokens naming made-up keys cannot cause a fetch storm,
 * nor keep a rotated or known key from being found.
 */
class IssuerKeys {
  private keySet?: Promise<RemoteKeySet>;

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
    const keySet = await this.remote();
    let key: Awaited<ReturnType<RemoteKeySet>>;
    try {
      key = await keySet({ alg: header.alg, kid: header.kid });
    } catch (error) {
      // No such key (after a fetch, or within the cooldown) is the token's fault; anything else the provider's.
      if (error instanceof joseErrors.JWKSNoMatchingKey || error instanceof joseErrors.JWKSMultipleMatchingKeys || error instanceof joseErrors.JOSENotSupported) {
        throw new InvalidTokenError('The token is malformed or its signature is not valid');
      }
      throw unavailable(error instanceof joseErrors.JWKSTimeout ? 'The identity provider did not answer in time' : 'The identity provider is unreachable');
    }
    // jsonwebtoken (under passport-jwt) takes the key as PEM.
    return (key instanceof KeyObject ? key : KeyObject.from(key)).export({ type: 'spki', format: 'pem' }).toString();
  }

  /** Whether the keys could be loaded (for readiness): once they were, the cached set serves until it is fetched again. */
  async reachable(): Promise<boolean> {
    try {
      const keySet = await this.remote();
      if (keySet.jwks() === undefined) await keySet.reload();
      return true;
    } catch {
      return false;
    }
  }

  private remote(): Promise<RemoteKeySet> {
    this.keySet ??= this.discover().catch((error: unknown) => {
      this.keySet = undefined;
      throw error instanceof DomainError ? error : unavailable('The identity provider is unreachable');
    });
    return this.keySet;
  }

  private async discover(): Promise<RemoteKeySet> {
    const timeoutDuration = this.options.fetchTimeoutMs ?? 5_000;
    let jwksUri = this.options.jwksUri;
    if (!jwksUri) {
      const response = await fetch(`${this.options.issuer.replace(/\/$/, '')}/.well-known/openid-configuration`, { signal: AbortSignal.timeout(timeoutDuration) });
      if (!response.ok) throw unavailable('The identity provider metadata is unavailable');
      const metadata = (await response.json()) as { issuer?: string; jwks_uri?: string };
      if (metadata.issuer !== this.options.issuer || typeof metadata.jwks_uri !== 'string')
        throw unavailable('The identity provider metadata does not match the configured issuer');
      jwksUri = metadata.jwks_uri;
    }
    return createRemoteJWKSet(new URL(jwksUri), { timeoutDuration, cooldownDuration: this.options.jwksCooldownMs ?? 30_000, cacheMaxAge: 10 * 60_000 });
  }
}

/** The caller a verified payload names. */
function authenticatedOf(payload: JwtPayload): Authenticated {
  for (const claim of REQUIRED_CLAIMS) if (payload[claim] === undefined) throw new InvalidTokenError(`The token's ${claim} claim is missing`);
  const scope = typeof payload.scope === 'string' ? payload.scope : '';
  const clientId = typeof payload.client_id === 'string' ? payload.client_id : String(payload.sub);
  const tenantId: unknown = payload.tenant_id;
  if (tenantId !== undefined && !isUuid(tenantId)) throw new InvalidTokenError('The token carries a malformed tenant');
  const username: unknown = payload.username;
  if (username !== undefined && (typeof username !== 'string' || username.length === 0 || username.length > 100))
    throw new InvalidTokenError('The token carries a malformed username');
  return {
    ...(username === undefined ? {} : { username: username.toLowerCase() }),
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
 * `kid` (jose's remote key set, see IssuerKeys), and checking signature, algorithm (asymmetric only), `typ` (RFC 9068), issuer, audience,
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
