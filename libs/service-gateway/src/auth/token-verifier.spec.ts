import http from 'node:http';
import { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { exportJWK, generateKeyPair, JWK, SignJWT } from 'jose';
import { DomainError, ErrorCode } from '@mission/contracts';
import { CLOCK_TOLERANCE_SECONDS, InvalidTokenError, TokenVerifier } from './token-verifier';

type KeyPair = Awaited<ReturnType<typeof generateKeyPair>>;

describe('TokenVerifier', () => {
  let server: http.Server;
  let issuer: string;
  const audience = 'https://gateway.example';
  const published: JWK[] = [];
  let jwksFetches = 0;
  let signing: KeyPair & { kid: string };

  async function newKey(): Promise<KeyPair & { kid: string }> {
    const pair = await generateKeyPair('ES256', { extractable: true });
    const kid = randomUUID();
    published.push({ ...(await exportJWK(pair.publicKey)), kid, alg: 'ES256', use: 'sig' });
    return { ...pair, kid };
  }

  function token(claims: Record<string, unknown> = {}, key = signing, options: { iat?: number; exp?: number; typ?: string } = {}): Promise<string> {
    const now = Math.floor(Date.now() / 1000);
    return new SignJWT({ scope: 'missions:read missions:write', client_id: 'cl_1', tenant_id: '5f0c3c1e-7f5e-4f7e-9a55-0d3b2c1a0e11', ...claims })
      .setProtectedHeader({ alg: 'ES256', kid: key.kid, typ: options.typ ?? 'at+jwt' })
      .setIssuer(String(claims.iss ?? issuer))
      .setAudience(String(claims.aud ?? audience))
      .setSubject('cl_1')
      .setJti(randomUUID())
      .setIssuedAt(options.iat ?? now)
      .setExpirationTime(options.exp ?? now + 3600)
      .sign(key.privateKey);
  }

  beforeAll(async () => {
    server = http.createServer((req, res) => {
      res.setHeader('content-type', 'application/json');
      if (req.url === '/.well-known/openid-configuration') return res.end(JSON.stringify({ issuer, jwks_uri: `${issuer}/jwks` }));
      if (req.url === '/jwks') {
        jwksFetches++;
        return res.end(JSON.stringify({ keys: published }));
      }
      res.statusCode = 404;
      res.end('{}');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    signing = await newKey();
  });

  afterAll(() => new Promise((resolve) => server.close(resolve)));

  it('accepts a valid token and exposes its tenant, subject and scopes', async () => {
    const verifier = new TokenVerifier({ issuer, audience });
    const auth = await verifier.verify(await token());
    expect(auth).toMatchObject({ subject: 'cl_1', clientId: 'cl_1', tenantId: '5f0c3c1e-7f5e-4f7e-9a55-0d3b2c1a0e11' });
    expect([...auth.scopes]).toEqual(['missions:read', 'missions:write']);
  });

  it('names a person’s user (the username claim, lower-case) and no user for a machine client', async () => {
    const verifier = new TokenVerifier({ issuer, audience });
    expect((await verifier.verify(await token({ username: 'Ada' }))).username).toBe('ada');
    expect((await verifier.verify(await token())).username).toBeUndefined();
    for (const username of ['', 42, 'x'.repeat(101), ['ada']]) {
      await expect(verifier.verify(await token({ username }))).rejects.toThrow('malformed username');
    }
  });

  it.each([
    ['another audience', { aud: 'https://elsewhere.example' }],
    ['another issuer', { iss: 'https://evil.example' }],
  ])('refuses a token for %s', async (_label, claims) => {
    await expect(new TokenVerifier({ issuer, audience }).verify(await token(claims))).rejects.toBeInstanceOf(InvalidTokenError);
  });

  it('tolerates 30 s of clock skew on expiry, not more', async () => {
    const verifier = new TokenVerifier({ issuer, audience });
    const now = Math.floor(Date.now() / 1000);
    await expect(verifier.verify(await token({}, signing, { iat: now - 3620, exp: now - 20 }))).resolves.toBeDefined();
    await expect(verifier.verify(await token({}, signing, { iat: now - 3700, exp: now - 60 }))).rejects.toThrow('expired');
  });

  it('refuses a symmetric token made with the public key (algorithm confusion)', async () => {
    const publicJwk = published[0];
    const secret = new TextEncoder().encode(JSON.stringify(publicJwk));
    const forged = await new SignJWT({ tenant_id: '5f0c3c1e-7f5e-4f7e-9a55-0d3b2c1a0e11', scope: 'missions:read' })
      .setProtectedHeader({ alg: 'HS256', kid: signing.kid, typ: 'at+jwt' })
      .setIssuer(issuer)
      .setAudience(audience)
      .setSubject('x')
      .setJti('j')
      .setIssuedAt()
      .setExpirationTime('1h')
      .sign(secret);
    await expect(new TokenVerifier({ issuer, audience }).verify(forged)).rejects.toBeInstanceOf(InvalidTokenError);
  });

  it('refuses a JWT that is not an access token (RFC 9068 typ at+jwt), such as an ID token', async () => {
    const verifier = new TokenVerifier({ issuer, audience });
    for (const typ of ['JWT', 'id_token+jwt', '']) await expect(verifier.verify(await token({}, signing, { typ }))).rejects.toThrow('not an access token');
    await expect(verifier.verify(await token({}, signing, { typ: 'application/at+jwt' }))).resolves.toBeDefined();
  });

  it('refuses a token without one of the claims an access token carries', async () => {
    const withoutJti = await new SignJWT({ tenant_id: '5f0c3c1e-7f5e-4f7e-9a55-0d3b2c1a0e11' })
      .setProtectedHeader({ alg: 'ES256', kid: signing.kid, typ: 'at+jwt' })
      .setIssuer(issuer)
      .setAudience(audience)
      .setSubject('cl_1')
      .setIssuedAt()
      .setExpirationTime('1h')
      .sign(signing.privateKey);
    await expect(new TokenVerifier({ issuer, audience }).verify(withoutJti)).rejects.toThrow('jti claim is missing');
  });

  it('refuses a token with a malformed tenant claim', async () => {
    await expect(new TokenVerifier({ issuer, audience }).verify(await token({ tenant_id: 'acme' }))).rejects.toThrow('malformed tenant');
  });

  it('refetches the key set when a token names a key published after the first fetch', async () => {
    const verifier = new TokenVerifier({ issuer, audience, jwksCooldownMs: 0 });
    await verifier.verify(await token());
    const before = jwksFetches;
    const rotated = await newKey();
    await expect(verifier.verify(await token({}, rotated))).resolves.toBeDefined();
    expect(jwksFetches).toBe(before + 1);
  });

  it('does not fetch the key set again for unknown keys within the cooldown, and keeps finding the keys it holds', async () => {
    // A key the identity provider publishes ahead of signing with it is in the set from the first fetch.
    const upcoming = await newKey();
    const verifier = new TokenVerifier({ issuer, audience, jwksCooldownMs: 60_000 });
    await verifier.verify(await token());
    const before = jwksFetches;
    const stranger = await generateKeyPair('ES256');
    for (let i = 0; i < 10; i++) await expect(verifier.verify(await token({}, { ...stranger, kid: randomUUID() }))).rejects.toBeInstanceOf(InvalidTokenError);
    expect(jwksFetches).toBe(before);
    // Made-up keys never crowd out real ones: the current key and the one about to sign both verify.
    await expect(verifier.verify(await token())).resolves.toBeDefined();
    await expect(verifier.verify(await token({}, upcoming))).resolves.toBeDefined();
    expect(jwksFetches).toBe(before);
  });

  it('reports an unreachable identity provider as a dependency failure, not a bad token', async () => {
    const verifier = new TokenVerifier({ issuer: 'http://127.0.0.1:1', audience, fetchTimeoutMs: 500 });
    const failure = await verifier.verify(await token()).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(DomainError);
    expect((failure as DomainError).code).toBe(ErrorCode.DependencyUnavailable);
    expect(await verifier.reachable()).toBe(false);
  });

  describe('memory of verified tokens', () => {
    it('checks a token once and answers its later uses from memory, without mixing tokens up', async () => {
      const verifier = new TokenVerifier({ issuer, audience });
      const checks = jest.spyOn(verifier as unknown as { verifyNow(token: string): Promise<unknown> }, 'verifyNow');
      const [first, second] = [await token(), await token({ tenant_id: '0a0b0c0d-0e0f-4a1b-8c2d-3e4f5a6b7c8d', scope: 'brain:read' })];
      for (let n = 0; n < 5; n++) {
        await expect(verifier.verify(first)).resolves.toMatchObject({ tenantId: '5f0c3c1e-7f5e-4f7e-9a55-0d3b2c1a0e11' });
        expect([...(await verifier.verify(second)).scopes]).toEqual(['brain:read']);
      }
      expect(checks).toHaveBeenCalledTimes(2);
    });

    it('forgets a token at its expiry (with the clock tolerance), and after five minutes at most', async () => {
      // Only the clock is faked (the key set still comes over a real socket).
      jest.useFakeTimers({
        doNotFake: ['nextTick', 'setImmediate', 'clearImmediate', 'setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'queueMicrotask', 'hrtime', 'performance'],
      });
      let now = Date.now();
      const advance = (ms: number): void => {
        now += ms;
        jest.setSystemTime(now);
      };
      const verifier = new TokenVerifier({ issuer, audience });
      const checks = jest.spyOn(verifier as unknown as { verifyNow(token: string): Promise<unknown> }, 'verifyNow');
      const issued = Math.floor(now / 1000);
      const shortLived = await token({}, signing, { iat: issued, exp: issued + 60 });
      await verifier.verify(shortLived);
      advance((60 + CLOCK_TOLERANCE_SECONDS - 1) * 1000);
      await expect(verifier.verify(shortLived)).resolves.toBeDefined();
      advance(2_000);
      await expect(verifier.verify(shortLived)).rejects.toThrow('expired');

      const longLived = await token({}, signing, { iat: Math.floor(now / 1000), exp: Math.floor(now / 1000) + 3600 });
      await verifier.verify(longLived);
      const before = checks.mock.calls.length;
      advance(4 * 60_000);
      await verifier.verify(longLived);
      expect(checks.mock.calls.length).toBe(before);
      advance(2 * 60_000);
      await verifier.verify(longLived);
      expect(checks.mock.calls.length).toBe(before + 1);
      jest.useRealTimers();
    });

    it('never remembers a token that failed, and keeps at most the configured number', async () => {
      const verifier = new TokenVerifier({ issuer, audience, cacheEntries: 2 });
      const checks = jest.spyOn(verifier as unknown as { verifyNow(token: string): Promise<unknown> }, 'verifyNow');
      const forged = `${(await token()).slice(0, -4)}AAAA`;
      await expect(verifier.verify(forged)).rejects.toBeInstanceOf(InvalidTokenError);
      await expect(verifier.verify(forged)).rejects.toBeInstanceOf(InvalidTokenError);
      const tokens = [await token(), await token(), await token()];
      for (const each of tokens) await verifier.verify(each);
      await verifier.verify(tokens[0]);
      expect(checks).toHaveBeenCalledTimes(2 + 3 + 1);
    });
  });
});
