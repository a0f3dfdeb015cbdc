import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser, Page } from 'playwright-core';
import { call, clientCredentialsToken, jwtClaims as claimsOf } from '../support/api-client';
import { launchChromium } from '../support/browser';
import { DistributedStack, startDistributedStack } from '../support/distributed-stack';
import { kafkaAccessFromEnv } from '../support/kafka-access';

interface TokenAnswer {
  readonly status: number;
  readonly body: { access_token?: string; refresh_token?: string; scope?: string; expires_in?: number; error?: string; error_description?: string };
}

/**
 * A tenant's user signs in through the idp's login page in a real headless Chromium
 * (authorization_code + PKCE S256), calls the API with the token, refreshes it, and a replayed
 * refresh token revokes the whole family. On the separate-process deployment.
 */
describe('Sign-in of a tenant user in a real browser', () => {
  let stack: DistributedStack;
  let browser: Browser;
  let callbackServer: http.Server;
  let redirectUri: string;
  let tokenEndpoint: string;
  let revocationEndpoint: string;
  let client: { clientId: string; clientSecret: string };
  let tenantId: string;
  let userId: string;
  const password = `pw-${randomBytes(12).toString('base64url')}`;

  const basic = (): string => `Basic ${Buffer.from(`${encodeURIComponent(client.clientId)}:${encodeURIComponent(client.clientSecret)}`).toString('base64')}`;

  async function token(form: Record<string, string>): Promise<TokenAnswer> {
    const response = await fetch(tokenEndpoint, {
      method: 'POST',
      headers: { authorization: basic(), 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams(form),
    });
    return { status: response.status, body: (await response.json()) as TokenAnswer['body'] };
  }

  function pkce(): { verifier: string; challenge: string } {
    const verifier = randomBytes(48).toString('base64url');
    return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
  }

  function authorizeUrl(challenge: string | undefined, state: string, scope = 'openid offline_access missions:read missions:write'): string {
    const url = new URL(`${stack.issuer}/auth`);
    url.search = new URLSearchParams({
      client_id: client.clientId,
      response_type: 'code',
      redirect_uri: redirectUri,
      scope,
      state,
      prompt: 'consent',
      ...(challenge ? { code_challenge: challenge, code_challenge_method: 'S256' } : {}),
    }).toString();
    return url.toString();
  }

  /** Drives the browser from the authorization request to the client's callback; returns the code. */
  async function authorize(page: Page, challenge: string, signIn: boolean): Promise<string> {
    const state = randomBytes(16).toString('base64url');
    await page.goto(authorizeUrl(challenge, state));
    if (signIn) {
      await page.waitForSelector('form input[name="username"]');
      await page.fill('input[name="username"]', 'ada');
      await page.fill('input[name="password"]', password);
      await page.click('button[type="submit"]');
    }
    await page
      .waitForURL((url) => url.toString().startsWith(redirectUri), { timeout: 15_000 })
      .catch(async (error: unknown) => {
        throw new Error(`The browser did not reach the callback; it shows ${page.url()}:\n${(await page.content()).slice(0, 2_000)}`, { cause: error });
      });
    const landed = new URL(page.url());
    expect(landed.searchParams.get('state')).toBe(state);
    expect(landed.searchParams.get('iss')).toBe(stack.issuer);
    const code = landed.searchParams.get('code');
    if (!code) throw new Error(`No code in the callback: ${landed.search}`);
    return code;
  }

  beforeAll(async () => {
    const kafka = kafkaAccessFromEnv();
    callbackServer = http.createServer((_req, res) => {
      res.setHeader('content-type', 'text/html; charset=utf-8');
      res.end('<!doctype html><title>Signed in</title><p>Signed in.</p>');
    });
    await new Promise<void>((resolve) => callbackServer.listen(0, '127.0.0.1', resolve));
    redirectUri = `http://127.0.0.1:${(callbackServer.address() as AddressInfo).port}/callback`;
    browser = await launchChromium();
    // As behind an ingress that terminates TLS: the apps trust its X-Forwarded-* headers.
    stack = await startDistributedStack(kafka, process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres', { TRUST_PROXY: 'true' });
    const discovery = (await (await fetch(`${stack.issuer}/.well-known/openid-configuration`)).json()) as Record<string, string>;
    tokenEndpoint = discovery.token_endpoint ?? '';
    revocationEndpoint = discovery.revocation_endpoint ?? '';
    expect(discovery.code_challenge_methods_supported).toEqual(['S256']);

    const adminToken = (await clientCredentialsToken(stack.issuer, stack.admin.clientId, stack.admin.clientSecret)).access_token;
    const tenant = await call(stack.gatewayUrl, 'POST', '/admin/tenants', { token: adminToken, body: { name: 'Browser tenant', tier: 'enterprise', rpm: 100_000 } });
    tenantId = tenant.body.id;
    const created = await call(stack.gatewayUrl, 'POST', `/admin/tenants/${tenantId}/clients`, { token: adminToken, body: { redirectUris: [redirectUri] } });
    expect(created.status).toBe(201);
    client = created.body;
    const user = await call(stack.gatewayUrl, 'POST', `/admin/tenants/${tenantId}/users`, {
      token: adminToken,
      body: { username: 'Ada', password, scopes: ['missions:read', 'missions:write'] },
    });
    expect(user.status).toBe(201);
    userId = user.body.id;
  }, 240_000);

  afterAll(async () => {
    await browser?.close();
    await new Promise((resolve) => callbackServer?.close(resolve));
    if (stack) expect(await stack.stop()).toEqual([]);
  }, 120_000);

  it('signs a user in with PKCE, calls the API, rotates refresh tokens and revokes the family on reuse', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    try {
      // A wrong password shows the form again with a message, and no code.
      const { verifier, challenge } = pkce();
      await page.goto(authorizeUrl(challenge, 'state-1'));
      await page.fill('input[name="username"]', 'ada');
      await page.fill('input[name="password"]', 'not the password');
      await page.click('button[type="submit"]');
      await expect(page.locator('[role="alert"]').textContent()).resolves.toContain('not right');
      expect(page.url()).not.toContain(redirectUri);

      const code = await authorize(page, challenge, true);
      const first = await token({ grant_type: 'authorization_code', code, redirect_uri: redirectUri, code_verifier: verifier });
      expect(first.status).toBe(200);
      const { access_token: accessToken = '', refresh_token: refreshToken1 = '' } = first.body;
      expect(refreshToken1).not.toBe('');
      expect(first.body.expires_in).toBe(3600);
      // A person's token names the user (created as "Ada", stored lower-case): assignees are checked against it.
      expect(claimsOf(accessToken)).toMatchObject({ iss: stack.issuer, aud: stack.gatewayUrl, sub: userId, client_id: client.clientId, tenant_id: tenantId, username: 'ada' });
      expect(claimsOf(accessToken).scope.split(' ').sort()).toEqual(['missions:read', 'missions:write']);

      // The token calls the API as the user, within the user's scopes only: a mission whose steps
      // read the Brain needs brain:read, which this user lacks; an approval-only one is theirs to submit.
      const reading = await call(stack.gatewayUrl, 'POST', '/api/missions', { token: accessToken, body: { title: 'Reads the Brain', objective: 'Signed in' } });
      expect({ status: reading.status, code: reading.body.code }).toEqual({ status: 403, code: 'insufficient_scope' });
      const submitted = await call(stack.gatewayUrl, 'POST', '/api/missions', {
        token: accessToken,
        body: { title: 'From the browser', objective: 'Signed in', steps: [{ type: 'approval', title: 'Sign off' }] },
      });
      expect(submitted.status).toBe(202);
      expect((await call(stack.gatewayUrl, 'GET', `/api/missions/${submitted.body.id}`, { token: accessToken })).status).toBe(200);
      expect((await call(stack.gatewayUrl, 'GET', '/api/hit', { token: accessToken })).status).toBe(403);

      // Refresh rotates: a new refresh token each time, and the new access token works.
      const second = await token({ grant_type: 'refresh_token', refresh_token: refreshToken1 });
      expect(second.status).toBe(200);
      const refreshToken2 = second.body.refresh_token ?? '';
      expect(claimsOf(second.body.access_token ?? '').username).toBe('ada');
      expect(refreshToken2).not.toBe(refreshToken1);
      expect((await call(stack.gatewayUrl, 'GET', '/api/missions', { token: second.body.access_token })).status).toBe(200);

      // Sessions, grants and refresh tokens live in PostgreSQL: they survive a restart of the idp.
      await stack.restart('idp');
      const third = await token({ grant_type: 'refresh_token', refresh_token: refreshToken2 });
      expect(third.status).toBe(200);
      const refreshToken3 = third.body.refresh_token ?? '';

      // Replaying a used refresh token revokes the whole family: the newest one dies with it.
      const replay = await token({ grant_type: 'refresh_token', refresh_token: refreshToken1 });
      expect(replay).toMatchObject({ status: 400, body: { error: 'invalid_grant' } });
      expect((await token({ grant_type: 'refresh_token', refresh_token: refreshToken3 })).body.error).toBe('invalid_grant');
    } finally {
      await context.close();
    }
  }, 180_000);

  it('refuses a code without its PKCE verifier or with another one, a replayed code (revoking what it issued), and a request without a challenge', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    try {
      const { challenge } = pkce();
      const code = await authorize(page, challenge, true);
      expect((await token({ grant_type: 'authorization_code', code, redirect_uri: redirectUri })).body.error).toBe('invalid_grant');
      const again = await authorize(page, challenge, false);
      expect((await token({ grant_type: 'authorization_code', code: again, redirect_uri: redirectUri, code_verifier: pkce().verifier })).body.error).toBe('invalid_grant');

      // A code is single-use: a replay is refused and revokes the tokens the first use issued.
      const sound = pkce();
      const fresh = await authorize(page, sound.challenge, false);
      const issued = await token({ grant_type: 'authorization_code', code: fresh, redirect_uri: redirectUri, code_verifier: sound.verifier });
      expect(issued.status).toBe(200);
      expect((await token({ grant_type: 'authorization_code', code: fresh, redirect_uri: redirectUri, code_verifier: sound.verifier })).body.error).toBe('invalid_grant');
      expect((await token({ grant_type: 'refresh_token', refresh_token: issued.body.refresh_token ?? '' })).body.error).toBe('invalid_grant');

      const response = await page.goto(authorizeUrl(undefined, 'no-pkce'));
      const landed = new URL(page.url());
      const error = landed.searchParams.get('error') ?? JSON.parse((await response?.text()) ?? '{}').error;
      expect(error).toBe('invalid_request');
    } finally {
      await context.close();
    }
  }, 120_000);

  it('lets one of two concurrent uses of a refresh token through at most, and revokes the family for the other', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    try {
      for (let round = 0; round < 3; round += 1) {
        const { verifier, challenge } = pkce();
        const code = await authorize(page, challenge, round === 0);
        const issued = await token({ grant_type: 'authorization_code', code, redirect_uri: redirectUri, code_verifier: verifier });
        expect(issued.status).toBe(200);
        const refreshToken = issued.body.refresh_token ?? '';
        const answers = await Promise.all([0, 1].map(() => token({ grant_type: 'refresh_token', refresh_token: refreshToken })));
        const winners = answers.filter((answer) => answer.status === 200);
        expect(winners.length).toBeLessThanOrEqual(1);
        for (const answer of answers.filter((candidate) => candidate.status !== 200)) expect(answer).toMatchObject({ status: 400, body: { error: 'invalid_grant' } });
        // The reuse revoked the grant: whatever the winner got is dead, and the family with it.
        for (const winner of winners) expect((await token({ grant_type: 'refresh_token', refresh_token: winner.body.refresh_token ?? '' })).body.error).toBe('invalid_grant');
        expect((await token({ grant_type: 'refresh_token', refresh_token: refreshToken })).body.error).toBe('invalid_grant');
      }
    } finally {
      await context.close();
    }
  }, 120_000);

  it('marks its cookies Secure behind a TLS-terminating proxy (X-Forwarded-Proto: https), and not on plain HTTP', async () => {
    const cookiesOf = async (headers: Record<string, string>): Promise<string[]> => {
      const response = await fetch(authorizeUrl(pkce().challenge, 'cookies'), { headers, redirect: 'manual' });
      expect(response.status).toBe(303);
      return response.headers.getSetCookie();
    };
    const proxied = await cookiesOf({ 'x-forwarded-proto': 'https' });
    expect(proxied.length).toBeGreaterThan(0);
    for (const cookie of proxied) expect(cookie.toLowerCase()).toMatch(/;\s*secure(;|$)/);
    const plain = await cookiesOf({});
    expect(plain.length).toBeGreaterThan(0);
    for (const cookie of plain) expect(cookie.toLowerCase()).not.toMatch(/;\s*secure(;|$)/);
  });

  it('revokes a refresh token on request', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    try {
      const { verifier, challenge } = pkce();
      const code = await authorize(page, challenge, true);
      const issued = await token({ grant_type: 'authorization_code', code, redirect_uri: redirectUri, code_verifier: verifier });
      const refreshToken = issued.body.refresh_token ?? '';
      const revoked = await fetch(revocationEndpoint, {
        method: 'POST',
        headers: { authorization: basic(), 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ token: refreshToken, token_type_hint: 'refresh_token' }),
      });
      expect(revoked.status).toBe(200);
      expect((await token({ grant_type: 'refresh_token', refresh_token: refreshToken })).body.error).toBe('invalid_grant');
    } finally {
      await context.close();
    }
  }, 120_000);
});
