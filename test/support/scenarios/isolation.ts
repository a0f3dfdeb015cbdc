import { createHmac, generateKeyPairSync, randomUUID, sign } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createPublicKey } from 'node:crypto';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { call, clientCredentialsToken, eventually, politeCall } from '../api-client';
import type { ScenarioContext, Tenant } from '../gateway-scenarios';
import { expectProblem } from '../gateway-scenarios';
import { testSigningKey } from '../test-signing-key';

const encode = (value: unknown): string => Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url');
const decode = (part: string): Record<string, any> => JSON.parse(Buffer.from(part, 'base64url').toString('utf8'));
const now = (): number => Math.floor(Date.now() / 1000);

/**
 * Forged and wrong tokens, each refused with 401 invalid_token, and a cross-tenant matrix over
 * every endpoint that takes an id: another tenant's resource is a 404 like a missing one.
 */
export function describeIsolationScenarios(context: ScenarioContext): void {
  const gateway = (): string => context.deployment.gatewayUrl;
  const probePath = (): string => `/api/missions?limit=1`;

  /** The claims of a sound tenant-A token, for tokens signed with the test key. */
  function soundClaims(overrides: Record<string, unknown> = {}): Record<string, unknown> {
    const issued = now();
    return {
      iss: context.deployment.issuer,
      aud: gateway(),
      sub: context.tenantA.clientId,
      client_id: context.tenantA.clientId,
      tenant_id: context.tenantA.id,
      scope: 'missions:read missions:write',
      jti: randomUUID(),
      iat: issued,
      exp: issued + 3600,
      ...overrides,
    };
  }

  function signWithTestKey(claims: Record<string, unknown>, header: Record<string, unknown> = {}): Promise<string> {
    const key = testSigningKey();
    return new SignJWT(claims).setProtectedHeader({ alg: 'ES256', typ: 'at+jwt', kid: key.kid, ...header } as { alg: string }).sign(key.privateKey);
  }

  /** Signs without a JOSE library's checks, for headers a library would refuse to produce. */
  function signRawWithTestKey(header: Record<string, unknown>, claims: Record<string, unknown>): string {
    const input = `${encode({ alg: 'ES256', typ: 'at+jwt', kid: testSigningKey().kid, ...header })}.${encode(claims)}`;
    return `${input}.${sign('sha256', Buffer.from(input), { key: testSigningKey().privateKey, dsaEncoding: 'ieee-p1363' }).toString('base64url')}`;
  }

  async function expectInvalidToken(token: string): Promise<void> {
    const response = await call(gateway(), 'GET', probePath(), { token });
    expectProblem(response, 401, 'unauthorized');
    const challenge = response.headers.get('www-authenticate') ?? '';
    expect(challenge).toContain('error="invalid_token"');
    expect(challenge).toContain(`resource_metadata="${gateway()}/.well-known/oauth-protected-resource"`);
  }

  async function realKid(): Promise<string> {
    const token = context.tenantA.token;
    return String(decode(token.split('.')[0] ?? '').kid);
  }

  describe('forged and wrong tokens', () => {
    it('accepts the test key with sound claims (the control: refusals below are for the claim or forgery alone)', async () => {
      const response = await call(gateway(), 'GET', probePath(), { token: await signWithTestKey(soundClaims()) });
      expect(response.status).toBe(200);
      const lowerCase = await call(gateway(), 'GET', probePath(), { headers: { authorization: `bearer ${context.tenantA.token}` } });
      expect(lowerCase.status).toBe(200);
    });

    it('refuses alg "none" in every spelling, with or without a trailing signature', async () => {
      const payload = encode(soundClaims());
      for (const alg of ['none', 'None', 'NONE', 'nOnE']) {
        await expectInvalidToken(`${encode({ alg, typ: 'at+jwt' })}.${payload}.`);
        await expectInvalidToken(`${encode({ alg, kid: await realKid() })}.${payload}.${encode('x')}`);
      }
    });

    it('refuses HS256 keyed with the issuer’s public key (algorithm confusion)', async () => {
      const jwks = (await (await fetch(`${context.deployment.issuer}/jwks`)).json()) as { keys: Array<Record<string, string>> };
      const kid = await realKid();
      const published = jwks.keys.find((key) => key.kid === kid);
      expect(published).toBeDefined();
      const pem = createPublicKey({ key: published as never, format: 'jwk' })
        .export({ format: 'pem', type: 'spki' })
        .toString();
      for (const secret of [JSON.stringify(published), pem, published?.x ?? '']) {
        const signingInput = `${encode({ alg: 'HS256', typ: 'at+jwt', kid })}.${encode(soundClaims())}`;
        const signature = createHmac('sha256', secret).update(signingInput).digest('base64url');
        await expectInvalidToken(`${signingInput}.${signature}`);
      }
    });

    it('refuses a real token whose claims were changed under the original signature', async () => {
      const [header, payload, signature] = context.tenantA.token.split('.') as [string, string, string];
      const claims = decode(payload);
      for (const change of [{ tenant_id: context.tenantB.id }, { scope: `${claims.scope} platform:admin` }, { exp: claims.exp + 86_400 }, { sub: 'someone-else' }]) {
        await expectInvalidToken(`${header}.${encode({ ...claims, ...change })}.${signature}`);
      }
      // Re-encoding the same claims differently is a change too: the signature covers the bytes.
      await expectInvalidToken(`${header}.${encode(JSON.stringify(claims, null, 1))}.${signature}`);
    });

    it('refuses a real token whose signature was stripped or truncated', async () => {
      const [header, payload, signature] = context.tenantA.token.split('.') as [string, string, string];
      await expectInvalidToken(`${header}.${payload}.`);
      await expectInvalidToken(`${header}.${payload}`);
      await expectInvalidToken(`${header}.${payload}.${signature.slice(0, -4)}`);
      await expectInvalidToken(`${encode({ ...decode(header), alg: 'none' })}.${payload}.`);
    });

    it('refuses a token signed by a foreign key that names the issuer’s real kid', async () => {
      const { privateKey } = await generateKeyPair('ES256');
      const forged = await new SignJWT(soundClaims()).setProtectedHeader({ alg: 'ES256', typ: 'at+jwt', kid: await realKid() }).sign(privateKey);
      await expectInvalidToken(forged);
      const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
      await expectInvalidToken(await new SignJWT(soundClaims()).setProtectedHeader({ alg: 'RS256', typ: 'at+jwt', kid: await realKid() }).sign(rsa.privateKey));
    });

    it('ignores a key embedded in the token (jwk header) and refuses the token', async () => {
      const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
      const jwk = await exportJWK(publicKey);
      await expectInvalidToken(await new SignJWT(soundClaims()).setProtectedHeader({ alg: 'ES256', typ: 'at+jwt', jwk }).sign(privateKey));
      await expectInvalidToken(await new SignJWT(soundClaims()).setProtectedHeader({ alg: 'ES256', typ: 'at+jwt', jwk, kid: await realKid() }).sign(privateKey));
    });

    it('never fetches a key set the token points to (jku, x5u) and refuses the token', async () => {
      const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
      const attackerJwks = { keys: [{ ...(await exportJWK(publicKey)), kid: 'attacker', alg: 'ES256', use: 'sig' }] };
      let fetched = 0;
      const server = http.createServer((_req, res) => {
        fetched++;
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify(attackerJwks));
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks`;
      try {
        await expectInvalidToken(await new SignJWT(soundClaims()).setProtectedHeader({ alg: 'ES256', typ: 'at+jwt', kid: 'attacker', jku: url }).sign(privateKey));
        await expectInvalidToken(await new SignJWT(soundClaims()).setProtectedHeader({ alg: 'ES256', typ: 'at+jwt', kid: 'attacker', x5u: url }).sign(privateKey));
        expect(fetched).toBe(0);
      } finally {
        await new Promise((resolve) => server.close(resolve));
      }
    });

    it('refuses an expired token beyond the 30 s skew, and tolerates one just inside it', async () => {
      await expectInvalidToken(await signWithTestKey(soundClaims({ iat: now() - 3_700, exp: now() - 60 })));
      await expectInvalidToken(await signWithTestKey(soundClaims({ iat: now() - 7_200, exp: now() - 3_600 })));
      const justExpired = await call(gateway(), 'GET', probePath(), { token: await signWithTestKey(soundClaims({ iat: now() - 3_610, exp: now() - 10 })) });
      expect(justExpired.status).toBe(200);
    });

    it('refuses a token that is not valid yet', async () => {
      await expectInvalidToken(await signWithTestKey(soundClaims({ nbf: now() + 120 })));
      await expectInvalidToken(await signWithTestKey(soundClaims({ nbf: now() + 86_400, iat: now() + 86_400, exp: now() + 90_000 })));
    });

    it('refuses a token of another issuer or for another audience, even under a published key', async () => {
      await expectInvalidToken(await signWithTestKey(soundClaims({ iss: 'https://evil.example' })));
      await expectInvalidToken(await signWithTestKey(soundClaims({ iss: `${context.deployment.issuer}/` })));
      await expectInvalidToken(await signWithTestKey(soundClaims({ aud: 'https://elsewhere.example' })));
      await expectInvalidToken(await signWithTestKey(soundClaims({ aud: [`${gateway()}/api`] })));
    });

    it('refuses a token missing a required claim, or with an unknown critical header', async () => {
      for (const missing of ['exp', 'iat', 'sub', 'jti']) {
        const claims = soundClaims();
        delete claims[missing];
        await expectInvalidToken(await signWithTestKey(claims));
      }
      // The raw signer is sound: without the critical header its token is accepted.
      expect((await call(gateway(), 'GET', probePath(), { token: signRawWithTestKey({}, soundClaims()) })).status).toBe(200);
      await expectInvalidToken(signRawWithTestKey({ crit: ['x-mission'], 'x-mission': true }, soundClaims()));
    });

    it('refuses a sound JWT of the issuer that is not an access token (RFC 9068: typ at+jwt), such as an ID token', async () => {
      for (const typ of ['JWT', 'id_token+jwt']) await expectInvalidToken(await signWithTestKey(soundClaims(), { typ }));
      await expectInvalidToken(signRawWithTestKey({ typ: undefined }, soundClaims()));
      expect((await call(gateway(), 'GET', probePath(), { token: await signWithTestKey(soundClaims(), { typ: 'application/at+jwt' }) })).status).toBe(200);
    });

    it.each([
      ['random text', 'hello'],
      ['three random segments', 'a.b.c'],
      ['base64 garbage', `${encode('{"alg":')}.${encode('[]')}.${encode('x')}`],
      ['a JSON array payload', `${encode({ alg: 'ES256' })}.${encode([1, 2])}.${encode('sig')}`],
      ['five segments (JWE-shaped)', 'a.b.c.d.e'],
      ['a very long token', 'x'.repeat(6_000)],
    ])('refuses garbage: %s', async (_label, token) => {
      await expectInvalidToken(token);
    });

    it('takes tokens from the Authorization header only, never from the query string or the body', async () => {
      const inQuery = await call(gateway(), 'GET', `${probePath()}&access_token=${context.tenantA.token}`);
      expectProblem(inQuery, 401, 'unauthorized');
      expect(inQuery.headers.get('www-authenticate')).not.toContain('error=');
      const inBody = await call(gateway(), 'POST', '/api/missions', { body: { title: 'T', objective: 'O', access_token: context.tenantA.token } });
      expectProblem(inBody, 401, 'unauthorized');
      const form = await call(gateway(), 'POST', '/api/missions', { rawBody: `access_token=${context.tenantA.token}`, contentType: 'application/x-www-form-urlencoded' });
      expect([401, 415]).toContain(form.status);
    });

    it('continues the caller’s W3C traceparent, or starts a trace', async () => {
      const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
      const traced = await call(gateway(), 'GET', probePath(), { token: context.tenantA.token, headers: { traceparent: `00-${traceId}-00f067aa0ba902b7-01` } });
      expect(traced.headers.get('traceparent')).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));
      const fresh = await call(gateway(), 'GET', probePath(), { token: context.tenantA.token, headers: { traceparent: 'garbage' } });
      expect(fresh.headers.get('traceparent')).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
    });
  });

  describe('cross-tenant matrix', () => {
    async function missionAwaitingApproval(tenant: Tenant): Promise<{ missionId: string; hitId: string }> {
      const submitted = await call(gateway(), 'POST', '/api/missions', {
        token: tenant.token,
        body: { title: 'Private to A', objective: 'Isolation', steps: [{ type: 'approval', title: 'A only' }] },
      });
      expect(submitted.status).toBe(202);
      return eventually(async () => {
        const mission = await politeCall(gateway(), 'GET', `/api/missions/${submitted.body.id}`, { token: tenant.token });
        const hitId = mission.body.steps?.[0]?.hitId;
        return mission.body.status === 'awaiting_approval' && hitId ? { missionId: submitted.body.id, hitId } : undefined;
      }, 'the mission to await approval');
    }

    async function brainDocument(tenant: Tenant): Promise<string | undefined> {
      const created = await call(gateway(), 'POST', '/api/brain/documents', {
        token: tenant.token,
        body: { title: 'A secret', content: 'Only tenant A may read this passage about isolation.' },
      });
      return created.status === 201 ? created.body.id : undefined;
    }

    it('answers every id endpoint with the same 404 for another tenant’s resource as for a missing one, and changes nothing', async () => {
      const { tenantA, tenantB } = context;
      const { missionId, hitId } = await missionAwaitingApproval(tenantA);
      const documentId = await brainDocument(tenantA);
      const routes: Array<[string, (id: string) => string, unknown?]> = [
        ['GET', (id) => `/api/missions/${id}`],
        ['POST', (id) => `/api/missions/${id}/cancel`],
      ];
      const hitRoutes: Array<[string, (id: string) => string, unknown?]> = [
        ['GET', (id) => `/api/hit/${id}`],
        ['POST', (id) => `/api/hit/${id}/approve`, { comment: 'from B' }],
        ['POST', (id) => `/api/hit/${id}/reject`, {}],
      ];
      const documentRoutes: Array<[string, (id: string) => string, unknown?]> = [
        ['GET', (id) => `/api/brain/documents/${id}`],
        ['DELETE', (id) => `/api/brain/documents/${id}`],
      ];
      const matrix: Array<[string, Array<[string, (id: string) => string, unknown?]>]> = [
        [missionId, routes],
        [hitId, hitRoutes],
        ...(documentId ? [[documentId, documentRoutes] as [string, typeof documentRoutes]] : []),
      ];
      for (const [id, endpoints] of matrix) {
        for (const [method, path, body] of endpoints) {
          const foreign = await call(gateway(), method, path(id), { token: tenantB.token, body });
          const missing = await call(gateway(), method, path(randomUUID()), { token: tenantB.token, body });
          expectProblem(foreign, 404, 'not_found');
          expectProblem(missing, 404, 'not_found');
          expect({ route: `${method} ${path(':id')}`, detail: foreign.body.detail, title: foreign.body.title }).toEqual({
            route: `${method} ${path(':id')}`,
            detail: missing.body.detail,
            title: missing.body.title,
          });
        }
      }

      const mission = await call(gateway(), 'GET', `/api/missions/${missionId}`, { token: tenantA.token });
      expect(mission.body.status).toBe('awaiting_approval');
      const hit = await call(gateway(), 'GET', `/api/hit/${hitId}`, { token: tenantA.token });
      expect(hit.body.status).toBe('pending');
      if (documentId) expect((await call(gateway(), 'GET', `/api/brain/documents/${documentId}`, { token: tenantA.token })).status).toBe(200);
      // A's own approval still works: B's attempts left no trace.
      expect((await call(gateway(), 'POST', `/api/hit/${hitId}/approve`, { token: tenantA.token })).status).toBe(200);
    });

    it('never answers another tenant with a final mission the owner’s reads keep in memory', async () => {
      const { tenantA, tenantB } = context;
      const { missionId } = await missionAwaitingApproval(tenantA);
      expect((await call(gateway(), 'POST', `/api/missions/${missionId}/cancel`, { token: tenantA.token })).status).toBe(200);
      // Final now: the owner's reads are answered from mission-service's cache after the first.
      const reads: unknown[] = [];
      for (let read = 0; read < 3; read += 1) {
        const own = await call(gateway(), 'GET', `/api/missions/${missionId}`, { token: tenantA.token });
        expect(own.status).toBe(200);
        expect(own.body).toMatchObject({ id: missionId, status: 'cancelled', title: 'Private to A' });
        reads.push(own.body);
      }
      expect(reads[2]).toEqual(reads[0]);
      expect(reads[1]).toEqual(reads[0]);
      const foreign = await call(gateway(), 'GET', `/api/missions/${missionId}`, { token: tenantB.token });
      const missing = await call(gateway(), 'GET', `/api/missions/${randomUUID()}`, { token: tenantB.token });
      expectProblem(foreign, 404, 'not_found');
      expect({ detail: foreign.body.detail, title: foreign.body.title }).toEqual({ detail: missing.body.detail, title: missing.body.title });
      expect(JSON.stringify(foreign.body)).not.toContain('Private to A');
    });

    it('never lists another tenant’s items', async () => {
      const { tenantA, tenantB } = context;
      const { missionId, hitId } = await missionAwaitingApproval(tenantA);
      const documentId = await brainDocument(tenantA);
      const all = async (tenant: Tenant, path: string): Promise<string[]> => {
        const ids: string[] = [];
        let cursor: string | null = null;
        do {
          const page: any = await call(gateway(), 'GET', `${path}?limit=100${cursor ? `&cursor=${cursor}` : ''}`, { token: tenant.token });
          expect(page.status).toBe(200);
          ids.push(...page.body.items.map((item: { id: string }) => item.id));
          cursor = page.body.nextCursor;
        } while (cursor);
        return ids;
      };
      expect(await all(tenantA, '/api/missions')).toContain(missionId);
      expect(await all(tenantA, '/api/hit')).toContain(hitId);
      expect(await all(tenantB, '/api/missions')).not.toContain(missionId);
      expect(await all(tenantB, '/api/hit')).not.toContain(hitId);
      if (documentId) {
        expect(await all(tenantA, '/api/brain/documents')).toContain(documentId);
        expect(await all(tenantB, '/api/brain/documents')).not.toContain(documentId);
        const searched = await call(gateway(), 'GET', `/api/brain/query?q=${encodeURIComponent('isolation passage tenant')}`, { token: tenantB.token });
        expect(searched.status).toBe(200);
        expect(searched.body.results.map((r: { documentId: string }) => r.documentId)).not.toContain(documentId);
      }
      // A token narrowed to one tenant never widens to another by asking.
      const narrowed = await clientCredentialsToken(context.deployment.issuer, tenantB.clientId, tenantB.clientSecret, 'missions:read');
      expect(decode(narrowed.access_token.split('.')[1] ?? '').tenant_id).toBe(tenantB.id);
    });
  });
}
