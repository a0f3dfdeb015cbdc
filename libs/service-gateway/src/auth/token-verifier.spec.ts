import http from 'node:http';
import { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { exportJWK, generateKeyPair, JWK, SignJWT } from 'jose';
import { DomainError, ErrorCode } from '@mission/contracts';
import { InvalidTokenError, TokenVerifier } from './token-verifier';

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

  function token(claims: Record<string, unknown> = {}, key = signing, options: { iat?: number; exp?: number } = {}): Promise<string> {
    const now = Math.floor(Date.now() / 1000);
    return new SignJWT({ scope: 'missions:read missions:write', client_id: 'cl_1', tenant_id: '5f0c3c1e-7f5e-4f7e-9a55-0d3b2c1a0e11', ...claims })
      .setProtectedHeader({ alg: 'ES256', kid: key.kid })
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
      .setProtectedHeader({ alg: 'HS256', kid: signing.kid })
      .setIssuer(issuer)
      .setAudience(audience)
      .setSubject('x')
      .setJti('j')
      .setIssuedAt()
      .setExpirationTime('1h')
      .sign(secret);
    await expect(new TokenVerifier({ issuer, audience }).verify(forged)).rejects.toBeInstanceOf(InvalidTokenError);
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

  it('does not refetch for unknown keys within the cooldown', async () => {
    const verifier = new TokenVerifier({ issuer, audience, jwksCooldownMs: 60_000 });
    await verifier.verify(await token());
    const before = jwksFetches;
    const stranger = await generateKeyPair('ES256');
    const unknown = { ...stranger, kid: randomUUID() };
    for (let i = 0; i < 5; i++) await expect(verifier.verify(await token({}, unknown))).rejects.toBeInstanceOf(InvalidTokenError);
    expect(jwksFetches).toBe(before);
  });

  it('reports an unreachable identity provider as a dependency failure, not a bad token', async () => {
    const verifier = new TokenVerifier({ issuer: 'http://127.0.0.1:1', audience, fetchTimeoutMs: 500 });
    const failure = await verifier.verify(await token()).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(DomainError);
    expect((failure as DomainError).code).toBe(ErrorCode.DependencyUnavailable);
    expect(await verifier.reachable()).toBe(false);
  });
});
