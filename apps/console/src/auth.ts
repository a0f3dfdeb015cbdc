/*
 * Signing in to the console: OAuth 2.0 authorization code with PKCE (S256) as the identity
 * provider's public client `mission-console`. Tokens live in this module's memory only; the one
 * thing kept across the redirect is the PKCE verifier and state, in this tab's sessionStorage, and
 * removed as soon as the code is exchanged.
 */

export interface ConsoleConfig {
  /** The identity provider. */
  readonly issuer: string;
  readonly clientId: string;
  /** `<gateway>/console/callback` */
  readonly redirectUri: string;
  /** `<gateway>/console/` */
  readonly consoleUrl: string;
  /** The gateway's public URL, the API's base. */
  readonly apiUrl: string;
  readonly scopes: readonly string[];
}

export interface ProviderEndpoints {
  readonly authorization: string;
  readonly token: string;
  readonly revocation?: string;
  readonly endSession?: string;
}

export interface Session {
  readonly accessToken: string;
  readonly refreshToken?: string;
  /** Epoch ms at which the access token expires. */
  readonly expiresAt: number;
  readonly username?: string;
  readonly scopes: readonly string[];
}

const PENDING_KEY = 'mission-console.sign-in';
/** Set while this tab holds a session, so that a reload signs in again at once (the idp's session answers without a form). */
export const RESUME_KEY = 'mission-console.resume';

export function base64Url(bytes: Uint8Array): string {
  let binary = '';
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

export function randomToken(bytes = 32): string {
  return base64Url(crypto.getRandomValues(new Uint8Array(bytes)));
}

/** RFC 7636 S256: BASE64URL(SHA-256(verifier)). */
export async function pkceChallenge(verifier: string): Promise<string> {
  return base64Url(new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier))));
}

/** The claims the console shows (who is signed in); the gateway, not the page, checks the token. */
export function readClaims(accessToken: string): { username?: string; scope?: string; exp?: number } {
  const payload = accessToken.split('.')[1];
  if (!payload) return {};
  try {
    const json = atob(payload.replace(/-/g, '+').replace(/_/g, '/'));
    const claims = JSON.parse(json) as Record<string, unknown>;
    return {
      username: typeof claims.username === 'string' ? claims.username : undefined,
      scope: typeof claims.scope === 'string' ? claims.scope : undefined,
      exp: typeof claims.exp === 'number' ? claims.exp : undefined,
    };
  } catch {
    return {};
  }
}

interface TokenAnswer {
  access_token?: string;
  refresh_token?: string;
  expires_in?: number;
  scope?: string;
  error?: string;
  error_description?: string;
}

export class SignInError extends Error {}

function sessionFrom(answer: TokenAnswer, now: number): Session {
  if (!answer.access_token) throw new SignInError(answer.error_description ?? answer.error ?? 'The identity provider gave no token');
  const claims = readClaims(answer.access_token);
  const scope = answer.scope ?? claims.scope ?? '';
  return {
    accessToken: answer.access_token,
    refreshToken: answer.refresh_token,
    expiresAt: now + (answer.expires_in ?? 3600) * 1000,
    username: claims.username,
    scopes: scope.split(' ').filter(Boolean),
  };
}

export async function discover(issuer: string, fetcher: typeof fetch = fetch): Promise<ProviderEndpoints> {
  const response = await fetcher(`${issuer}/.well-known/openid-configuration`);
  if (!response.ok) throw new SignInError(`The identity provider's metadata could not be read (${response.status})`);
  const metadata = (await response.json()) as Record<string, unknown>;
  const text = (key: string): string | undefined => (typeof metadata[key] === 'string' ? (metadata[key] as string) : undefined);
  const authorization = text('authorization_endpoint');
  const token = text('token_endpoint');
  if (!authorization || !token) throw new SignInError('The identity provider does not offer the authorization code flow');
  return { authorization, token, revocation: text('revocation_endpoint'), endSession: text('end_session_endpoint') };
}

/** The authorization request the browser is sent to (and what to keep for the way back). */
export async function authorizationRequest(
  config: ConsoleConfig,
  endpoints: ProviderEndpoints,
  organisation: string | undefined,
  mode: SignInMode,
): Promise<{ url: string; pending: { verifier: string; state: string } }> {
  const verifier = randomToken(48);
  const state = randomToken(16);
  const url = new URL(endpoints.authorization);
  url.search = new URLSearchParams({
    client_id: config.clientId,
    response_type: 'code',
    redirect_uri: config.redirectUri,
    scope: config.scopes.join(' '),
    state,
    code_challenge: await pkceChallenge(verifier),
    code_challenge_method: 'S256',
    // offline_access (a refresh token) needs consent; the idp gives it for its platform's own client.
    // A sign-in the user asked for always shows the login form, so the organisation and user are
    // the ones named there, never whoever last signed in to the idp in this browser; only a reload
    // of a tab that was signed in takes the idp's session as it is.
    prompt: mode === 'sign-in' ? 'login consent' : 'consent',
    ...(organisation ? { organization: organisation } : {}),
  }).toString();
  return { url: url.toString(), pending: { verifier, state } };
}

/** `sign-in`: the user asked to sign in; `resume`: a reload of a tab that was signed in. */
export type SignInMode = 'sign-in' | 'resume';

/** Sends the browser to the identity provider's sign-in. */
export async function startSignIn(config: ConsoleConfig, endpoints: ProviderEndpoints, mode: SignInMode, organisation?: string): Promise<void> {
  const { url, pending } = await authorizationRequest(config, endpoints, organisation, mode);
  sessionStorage.setItem(PENDING_KEY, JSON.stringify(pending));
  location.assign(url);
}

/** Completes a sign-in at the callback: checks the state and exchanges the code (with the verifier) for tokens. */
export async function completeSignIn(config: ConsoleConfig, endpoints: ProviderEndpoints, callback: URL, fetcher: typeof fetch = fetch): Promise<Session> {
  const stored = sessionStorage.getItem(PENDING_KEY);
  sessionStorage.removeItem(PENDING_KEY);
  const pending = stored ? (JSON.parse(stored) as { verifier?: string; state?: string }) : undefined;
  // The state first: an answer to a sign-in this tab did not start (a crafted link) says nothing.
  if (!pending?.verifier || callback.searchParams.get('state') !== pending.state) {
    throw new SignInError('This sign-in was not started here or was already used; sign in again');
  }
  const error = callback.searchParams.get('error');
  if (error) throw new SignInError(`The sign-in did not complete: ${callback.searchParams.get('error_description') ?? error}`);
  const code = callback.searchParams.get('code');
  if (!code) throw new SignInError('The identity provider gave no code; sign in again');
  const answer = await tokenRequest(endpoints, fetcher, {
    grant_type: 'authorization_code',
    code,
    redirect_uri: config.redirectUri,
    client_id: config.clientId,
    code_verifier: pending.verifier,
  });
  return sessionFrom(answer, Date.now());
}

/** A new access token (and the next refresh token: each is used once). */
export async function refreshSession(config: ConsoleConfig, endpoints: ProviderEndpoints, session: Session, fetcher: typeof fetch = fetch): Promise<Session> {
  if (!session.refreshToken) throw new SignInError('The session cannot be renewed; sign in again');
  const answer = await tokenRequest(endpoints, fetcher, { grant_type: 'refresh_token', refresh_token: session.refreshToken, client_id: config.clientId });
  return sessionFrom(answer, Date.now());
}

async function tokenRequest(endpoints: ProviderEndpoints, fetcher: typeof fetch, form: Record<string, string>): Promise<TokenAnswer> {
  const response = await fetcher(endpoints.token, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
    body: new URLSearchParams(form),
  });
  const answer = (await response.json().catch(() => ({}))) as TokenAnswer;
  if (!response.ok) throw new SignInError(answer.error_description ?? answer.error ?? `The identity provider answered ${response.status}`);
  return answer;
}

/** When to renew: a minute before expiry, never sooner than 5 s from now. */
export function refreshDelay(session: Pick<Session, 'expiresAt'>, now: number): number {
  return Math.max(5_000, session.expiresAt - now - 60_000);
}

/** Revokes the refresh token (ending the sign-in's grant) and sends the browser to end the identity provider's session. */
export async function signOut(config: ConsoleConfig, endpoints: ProviderEndpoints, session: Session | undefined, fetcher: typeof fetch = fetch): Promise<void> {
  sessionStorage.removeItem(RESUME_KEY);
  if (session?.refreshToken && endpoints.revocation) {
    await fetcher(endpoints.revocation, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ token: session.refreshToken, token_type_hint: 'refresh_token', client_id: config.clientId }),
    }).catch(() => undefined);
  }
  if (!endpoints.endSession) {
    location.assign(config.consoleUrl);
    return;
  }
  const url = new URL(endpoints.endSession);
  url.search = new URLSearchParams({ client_id: config.clientId, post_logout_redirect_uri: config.consoleUrl, state: 'signed-out' }).toString();
  location.assign(url.toString());
}
