import { authorizationRequest, base64Url, completeSignIn, pkceChallenge, readClaims, refreshDelay, SignInError, type ConsoleConfig } from './auth';

class MemoryStorage {
  private readonly values = new Map<string, string>();
  getItem(key: string): string | null {
    return this.values.get(key) ?? null;
  }
  setItem(key: string, value: string): void {
    this.values.set(key, value);
  }
  removeItem(key: string): void {
    this.values.delete(key);
  }
}

const config: ConsoleConfig = {
  issuer: 'http://idp.test',
  clientId: 'mission-console',
  redirectUri: 'http://gw.test/console/callback',
  consoleUrl: 'http://gw.test/console/',
  apiUrl: 'http://gw.test',
  scopes: ['openid', 'offline_access', 'hits:read'],
};
const encode = (text: string): string => base64Url(new TextEncoder().encode(text));
const endpoints = { authorization: 'http://idp.test/auth', token: 'http://idp.test/token' };

describe('console sign-in', () => {
  beforeEach(() => {
    (globalThis as any).sessionStorage = new MemoryStorage();
  });

  it('derives the PKCE challenge as RFC 7636 does (its appendix B example)', async () => {
    await expect(pkceChallenge('dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk')).resolves.toBe('E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM');
  });

  it('asks for a code with PKCE S256, a fresh state and verifier each time, and passes the organisation on', async () => {
    const first = await authorizationRequest(config, endpoints, 'Acme', 'sign-in');
    const second = await authorizationRequest(config, endpoints, undefined, 'resume');
    const url = new URL(first.url);
    expect(Object.fromEntries(url.searchParams)).toEqual({
      client_id: 'mission-console',
      response_type: 'code',
      redirect_uri: 'http://gw.test/console/callback',
      scope: 'openid offline_access hits:read',
      state: first.pending.state,
      code_challenge: await pkceChallenge(first.pending.verifier),
      code_challenge_method: 'S256',
      // Asked for: the login form always, so the organisation typed there is the one signed in to.
      prompt: 'login consent',
      organization: 'Acme',
    });
    // A reload of a signed-in tab takes the idp's session as it is.
    expect(new URL(second.url).searchParams.get('prompt')).toBe('consent');
    expect(first.pending.verifier).toMatch(/^[A-Za-z0-9_-]{64}$/);
    expect(second.pending.verifier).not.toBe(first.pending.verifier);
    expect(second.pending.state).not.toBe(first.pending.state);
    expect(new URL(second.url).searchParams.has('organization')).toBe(false);
  });

  it('exchanges the code with its verifier once, and refuses a callback whose state it did not send', async () => {
    sessionStorage.setItem('mission-console.sign-in', JSON.stringify({ verifier: 'v'.repeat(64), state: 's1' }));
    const token = `h.${encode(JSON.stringify({ username: 'ada', scope: 'hits:read', exp: 1 }))}.sig`;
    const requests: Array<Record<string, string>> = [];
    const fetcher = (async (_url: string, init: RequestInit) => {
      requests.push(Object.fromEntries(new URLSearchParams(String(init.body))));
      return new Response(JSON.stringify({ access_token: token, refresh_token: 'r1', expires_in: 3600, scope: 'hits:read' }), { status: 200 });
    }) as unknown as typeof fetch;
    const session = await completeSignIn(config, endpoints, new URL('http://gw.test/console/callback?code=c1&state=s1'), fetcher);
    expect(session).toMatchObject({ accessToken: token, refreshToken: 'r1', username: 'ada', scopes: ['hits:read'] });
    expect(requests).toEqual([{ grant_type: 'authorization_code', code: 'c1', redirect_uri: config.redirectUri, client_id: 'mission-console', code_verifier: 'v'.repeat(64) }]);
    // The verifier is gone: the same callback again is refused, as is one with another state.
    await expect(completeSignIn(config, endpoints, new URL('http://gw.test/console/callback?code=c1&state=s1'), fetcher)).rejects.toThrow(SignInError);
    sessionStorage.setItem('mission-console.sign-in', JSON.stringify({ verifier: 'v'.repeat(64), state: 's2' }));
    await expect(completeSignIn(config, endpoints, new URL('http://gw.test/console/callback?code=c1&state=other'), fetcher)).rejects.toThrow(SignInError);
    expect(requests).toHaveLength(1);
    // The idp's refusal of a sign-in this tab started is shown; a crafted error link without its state says nothing of its own.
    sessionStorage.setItem('mission-console.sign-in', JSON.stringify({ verifier: 'v'.repeat(64), state: 's3' }));
    await expect(
      completeSignIn(config, endpoints, new URL('http://gw.test/console/callback?state=s3&error=access_denied&error_description=no+such+user'), fetcher),
    ).rejects.toThrow('The sign-in did not complete: no such user');
    await expect(completeSignIn(config, endpoints, new URL('http://gw.test/console/callback?error=access_denied&error_description=Call+0800+now'), fetcher)).rejects.toThrow(
      'This sign-in was not started here',
    );
  });

  it('renews a minute before expiry, never sooner than 5 s from now', () => {
    expect(refreshDelay({ expiresAt: 3_600_000 }, 0)).toBe(3_540_000);
    expect(refreshDelay({ expiresAt: 30_000 }, 0)).toBe(5_000);
  });

  it('reads the username from a token, and nothing from one it cannot read', () => {
    expect(readClaims(`a.${encode('{"username":"ada"}')}.c`).username).toBe('ada');
    expect(readClaims('not a token')).toEqual({});
    expect(readClaims('a.!!!.c')).toEqual({});
  });
});
