import { ErrorCode } from '@mission/contracts';
import { HttpProblemError } from '../http/http-problem.error';
import type { Authenticated } from './authenticated';
import { InvalidTokenError, TokenVerifier } from './token-verifier';

const BEARER = /^Bearer[ ]+([A-Za-z0-9\-._~+/]+=*)$/i;
const BEARER_SCHEME = /^Bearer(?:[ ]|$)/i;

function quoted(value: string): string {
  return `"${value.replace(/["\\]/g, '')}"`;
}

function resourceMetadata(publicUrl: string): string {
  return `${publicUrl.replace(/\/$/, '')}/.well-known/oauth-protected-resource`;
}

/** A 401 with its Bearer challenge; RFC 6750 §3: no error code when no token was presented at all. */
export function unauthorizedProblem(publicUrl: string, description: string, tokenPresented: boolean): HttpProblemError {
  const parts = [`realm="mission-service"`, `resource_metadata=${quoted(resourceMetadata(publicUrl))}`];
  if (tokenPresented) parts.push(`error="invalid_token"`, `error_description=${quoted(description)}`);
  return new HttpProblemError(ErrorCode.Unauthorized, description, { 'WWW-Authenticate': `Bearer ${parts.join(', ')}` });
}

/**
 * A 403 naming the scopes the operation needs, so that a client can ask for them (step-up). With
 * none to name (an endpoint whose operations check their own scopes, refused to a token without a
 * tenant), the challenge carries no scope.
 */
export function insufficientScopeProblem(publicUrl: string, needed: readonly string[]): HttpProblemError {
  const scope = needed.join(' ');
  const detail = needed.length > 0 ? `This operation needs the scope ${scope}` : 'This endpoint needs a token issued to a tenant';
  return new HttpProblemError(ErrorCode.InsufficientScope, detail, {
    'WWW-Authenticate': `Bearer realm="mission-service", error="insufficient_scope"${needed.length > 0 ? `, scope=${quoted(scope)}` : ''}, resource_metadata=${quoted(resourceMetadata(publicUrl))}`,
  });
}

/**
 * The caller of a request from its Authorization header, or a 401 with the Bearer challenge:
 * without an error code when no bearer token was presented (no header, or another scheme: RFC
 * 6750 §3.1), with `invalid_token` for a malformed or invalid one. Errors reaching the identity
 * provider propagate (503).
 */
export async function authenticate(header: string | undefined, verifier: TokenVerifier, publicUrl: string): Promise<Authenticated> {
  if (header === undefined || !BEARER_SCHEME.test(header)) throw unauthorizedProblem(publicUrl, 'A bearer token is required', false);
  const token = BEARER.exec(header)?.[1];
  if (!token) throw unauthorizedProblem(publicUrl, 'The Authorization header must be "Bearer <token>"', true);
  try {
    return await verifier.verify(token);
  } catch (error) {
    if (error instanceof InvalidTokenError) throw unauthorizedProblem(publicUrl, error.message, true);
    throw error;
  }
}
