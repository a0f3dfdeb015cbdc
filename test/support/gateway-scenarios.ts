import { randomUUID } from 'node:crypto';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { call, clientCredentialsToken, postBytes, postDeclaringLength, rawExchange, waitForMission, politeCall } from './api-client';
import { sample } from './metrics-text';
import { describeApprovalScenarios } from './scenarios/approvals';
import { describeDeadlineAndAssigneeScenarios } from './scenarios/deadlines';
import { describeBrainScenarios } from './scenarios/brain';
import { describeEventScenarios } from './scenarios/events';
import { describeWebhookScenarios } from './scenarios/webhooks';
import { describeIsolationScenarios } from './scenarios/isolation';
import { describeKeyRotationScenarios } from './scenarios/key-rotation';
import { describeMcpScenarios } from './scenarios/mcp';
import { describeOpenApiScenarios } from './scenarios/openapi';
import { describeOperatorScenarios } from './scenarios/operator';
import { describeRateLimitScenarios } from './scenarios/rate-limits';

/** The gateway's request timeout in the scenarios' deployments (GATEWAY_REQUEST_TIMEOUT_SECONDS): short, so the slow-sender test is quick. */
export const SCENARIO_REQUEST_TIMEOUT_SECONDS = 4;

export interface Deployment {
  readonly gatewayUrl: string;
  /** The gateway's operations port: /metrics and the readiness details (never the public port). */
  readonly opsUrl: string;
  /** What its readiness details name: the gateway's own checks, and every other part of its process. */
  readonly readinessParts: readonly string[];
  /** GATEWAY_REQUEST_TIMEOUT_SECONDS of the deployment's gateway. */
  readonly requestTimeoutSeconds: number;
  readonly issuer: string;
  readonly admin: { readonly clientId: string; readonly clientSecret: string };
  teardown(): Promise<void>;
}

export interface Tenant {
  readonly id: string;
  readonly token: string;
  readonly clientId: string;
  readonly clientSecret: string;
}

/** What the scenario blocks share, filled in by the suite's beforeAll. */
export interface ScenarioContext {
  deployment: Deployment;
  adminToken: string;
  tenantA: Tenant;
  tenantB: Tenant;
}

export function expectProblem(response: { status: number; headers: Headers; body: any }, status: number, code: string): void {
  expect({ status: response.status, code: response.body?.code }).toEqual({ status, code });
  expect(response.headers.get('content-type')).toContain('application/problem+json');
  expect(response.body).toMatchObject({ status, title: expect.any(String), detail: expect.any(String), instance: expect.any(String) });
  expect(response.body.type).toMatch(/^https?:\/\/.+#/);
  expect(response.body.requestId).toBe(response.headers.get('x-request-id'));
  expect(JSON.stringify(response.body)).not.toMatch(/at .+\.(ts|js):\d+/);
}

/**
 * What a client sees through the gateway, whatever the wiring: the same scenarios run against
 * the all-in-one process (npm test) and against separate processes on Kafka (integration).
 */
export function describeGatewayScenarios(name: string, deploy: () => Promise<Deployment>): void {
  describe(`Gateway end to end: ${name}`, () => {
    let deployment: Deployment;
    let adminToken: string;
    let tenantA: Tenant;
    let tenantB: Tenant;

    async function createTenant(tierName: string): Promise<Tenant> {
      const created = await call(deployment.gatewayUrl, 'POST', '/admin/tenants', { token: adminToken, body: { name: tierName, tier: 'business' } });
      expect(created.status).toBe(201);
      const { clientId, clientSecret } = created.body.client;
      const token = await clientCredentialsToken(deployment.issuer, clientId, clientSecret);
      return { id: created.body.id, token: token.access_token, clientId, clientSecret };
    }

    const context = {} as ScenarioContext;

    beforeAll(async () => {
      deployment = await deploy();
      adminToken = (await clientCredentialsToken(deployment.issuer, deployment.admin.clientId, deployment.admin.clientSecret)).access_token;
      tenantA = await createTenant('Tenant A');
      tenantB = await createTenant('Tenant B');
      Object.assign(context, { deployment, adminToken, tenantA, tenantB });
    }, 180_000);

    afterAll(async () => {
      await deployment?.teardown();
    }, 60_000);

    describe('operator API', () => {
      it('creates a tenant with a client holding all seven tenant scopes and shows it again without the secret', async () => {
        const created = await call(deployment.gatewayUrl, 'POST', '/admin/tenants', {
          token: adminToken,
          body: { name: 'Acme', tier: 'enterprise', rpm: 12_000 },
        });
        expect(created.status).toBe(201);
        expect(created.body).toMatchObject({ id: expect.any(String), name: 'Acme', tier: 'enterprise', rpm: 12_000 });
        expect(created.body.client.scopes.sort()).toEqual(['brain:read', 'brain:write', 'hits:approve', 'hits:read', 'missions:read', 'missions:write', 'webhooks:manage']);
        const shown = await call(deployment.gatewayUrl, 'GET', `/admin/tenants/${created.body.id}`, { token: adminToken });
        expect(shown.status).toBe(200);
        expect(shown.body).toMatchObject({ id: created.body.id, name: 'Acme', tier: 'enterprise', rpm: 12_000 });
        expect(JSON.stringify(shown.body)).not.toContain(created.body.client.clientSecret);
      });

      it('validates tenants: enterprise needs rpm, unknown tiers and fields are refused', async () => {
        const noRpm = await call(deployment.gatewayUrl, 'POST', '/admin/tenants', { token: adminToken, body: { name: 'X', tier: 'enterprise' } });
        expectProblem(noRpm, 400, 'validation_failed');
        expect(noRpm.body.errors).toEqual([{ field: 'rpm', message: expect.any(String) }]);
        const badTier = await call(deployment.gatewayUrl, 'POST', '/admin/tenants', { token: adminToken, body: { name: 'X', tier: 'gold', extra: 1 } });
        expectProblem(badTier, 400, 'validation_failed');
        expect(badTier.body.errors.map((e: { field: string }) => e.field).sort()).toEqual(['extra', 'tier']);
      });

      it('keeps tenant tokens out of /admin', async () => {
        const response = await call(deployment.gatewayUrl, 'POST', '/admin/tenants', { token: tenantA.token, body: { name: 'X', tier: 'starter' } });
        expectProblem(response, 403, 'insufficient_scope');
        expect(response.headers.get('www-authenticate')).toContain('scope="platform:admin"');
      });

      it('keeps the operator token out of tenant APIs', async () => {
        const response = await call(deployment.gatewayUrl, 'GET', `/api/missions/${randomUUID()}`, { token: adminToken });
        expectProblem(response, 403, 'insufficient_scope');
        expect(response.headers.get('www-authenticate')).toContain('scope="missions:read"');
        // /mcp has no scope of its own (each tool has one): the challenge then names none, never an empty one.
        const mcp = await call(deployment.gatewayUrl, 'POST', '/mcp', {
          token: adminToken,
          body: { jsonrpc: '2.0', id: 1, method: 'tools/list' },
          headers: { accept: 'application/json, text/event-stream' },
        });
        expectProblem(mcp, 403, 'insufficient_scope');
        expect(mcp.headers.get('www-authenticate')).toContain('error="insufficient_scope"');
        expect(mcp.headers.get('www-authenticate')).not.toContain('scope=');
        expect(mcp.body.detail).toBe('This endpoint needs a token issued to a tenant');
      });
    });

    describe('authentication', () => {
      it('refuses a client whose secret is guessed with 429 and Retry-After, without slowing others or locking out its own known secret', async () => {
        const created = await call(deployment.gatewayUrl, 'POST', '/admin/tenants', { token: adminToken, body: { name: 'Guessed', tier: 'starter' } });
        expect(created.status).toBe(201);
        const { clientId, clientSecret } = created.body.client as { clientId: string; clientSecret: string };
        await clientCredentialsToken(deployment.issuer, clientId, clientSecret);
        const tokenRequest = (secret: string) =>
          fetch(`${deployment.issuer}/token`, {
            method: 'POST',
            headers: { authorization: `Basic ${Buffer.from(`${clientId}:${secret}`).toString('base64')}`, 'content-type': 'application/x-www-form-urlencoded' },
            body: 'grant_type=client_credentials',
          });
        const statuses: number[] = [];
        let refused: Response | undefined;
        const guessing = performance.now();
        for (let guess = 0; guess < 12; guess++) {
          const response = await tokenRequest(`wrong-${guess}`);
          statuses.push(response.status);
          if (response.status === 429) refused = response;
          await response.arrayBuffer();
        }
        // A burst of six checks (the client's own first token took one), then refused without
        // another check; the budget (30 a minute) gives one more try per 2 s, so a slow machine
        // may see that many more 401s.
        const refills = Math.floor((performance.now() - guessing) / 2_000);
        expect(statuses.slice(0, 5)).toEqual([401, 401, 401, 401, 401]);
        expect(statuses.slice(5).filter((status) => status === 401).length).toBeLessThanOrEqual(refills);
        expect(statuses.slice(5).every((status) => status === 429 || status === 401)).toBe(true);
        expect(Number(refused?.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
        // The client's own secret, verified before the guessing, still gets tokens; another tenant's new client too, at once.
        expect((await tokenRequest(clientSecret)).status).toBe(200);
        const started = performance.now();
        const bystander = await call(deployment.gatewayUrl, 'POST', `/admin/tenants/${tenantB.id}/clients`, { token: adminToken, body: {} });
        expect((await clientCredentialsToken(deployment.issuer, bystander.body.clientId, bystander.body.clientSecret)).access_token).toBeTruthy();
        expect(performance.now() - started).toBeLessThan(2_000);
      });

      it('publishes protected-resource metadata that leads to the issuer', async () => {
        const response = await call(deployment.gatewayUrl, 'GET', '/.well-known/oauth-protected-resource');
        expect(response.status).toBe(200);
        expect(response.body).toMatchObject({ resource: deployment.gatewayUrl, authorization_servers: [deployment.issuer], bearer_methods_supported: ['header'] });
        const discovery = await (await fetch(`${deployment.issuer}/.well-known/openid-configuration`)).json();
        expect(discovery).toMatchObject({ issuer: deployment.issuer, token_endpoint: expect.any(String), jwks_uri: expect.any(String) });
      });

      it('answers a request without a token with 401 and a challenge carrying no error code', async () => {
        const response = await call(deployment.gatewayUrl, 'GET', `/api/missions/${randomUUID()}`);
        expectProblem(response, 401, 'unauthorized');
        const challenge = response.headers.get('www-authenticate') ?? '';
        expect(challenge).toBe(`Bearer realm="mission-service", resource_metadata="${deployment.gatewayUrl}/.well-known/oauth-protected-resource"`);
      });

      it.each([
        ['a garbage token', 'Bearer not.a.jwt'],
        ['a token in the wrong place', 'Bearer'],
      ])('answers %s with 401 invalid_token', async (_label, authorization) => {
        const response = await call(deployment.gatewayUrl, 'GET', `/api/missions/${randomUUID()}`, { headers: { authorization } });
        expectProblem(response, 401, 'unauthorized');
        expect(response.headers.get('www-authenticate')).toContain('error="invalid_token"');
        expect(response.headers.get('www-authenticate')).toContain('resource_metadata=');
      });

      it('issues tokens to clients authenticating with client_secret_post as with client_secret_basic', async () => {
        const discovery = (await (await fetch(`${deployment.issuer}/.well-known/openid-configuration`)).json()) as { token_endpoint: string };
        const form = new URLSearchParams({ grant_type: 'client_credentials', client_id: tenantA.clientId, client_secret: tenantA.clientSecret });
        const response = await fetch(discovery.token_endpoint, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: form });
        expect(response.status).toBe(200);
        const { access_token: token } = (await response.json()) as { access_token: string };
        expect((await call(deployment.gatewayUrl, 'GET', '/api/missions?limit=1', { token })).status).toBe(200);
        const wrong = new URLSearchParams({ grant_type: 'client_credentials', client_id: tenantA.clientId, client_secret: 'not-the-secret' });
        expect((await fetch(discovery.token_endpoint, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: wrong })).status).toBe(401);
      });

      it('answers another authentication scheme as no token at all (RFC 6750 §3.1: no error code)', async () => {
        const response = await call(deployment.gatewayUrl, 'GET', `/api/missions/${randomUUID()}`, { headers: { authorization: 'Basic dXNlcjpwYXNz' } });
        expectProblem(response, 401, 'unauthorized');
        expect(response.headers.get('www-authenticate')).toBe(`Bearer realm="mission-service", resource_metadata="${deployment.gatewayUrl}/.well-known/oauth-protected-resource"`);
      });

      it('authenticates before reading a body: without a token a malformed, oversized or non-JSON body is a 401', async () => {
        const malformed = await call(deployment.gatewayUrl, 'POST', '/api/missions', { rawBody: '{"title":' });
        const foreign = await call(deployment.gatewayUrl, 'POST', '/api/missions', { rawBody: 'title=x', contentType: 'application/x-www-form-urlencoded' });
        // Declared, not sent: a whole oversized body races the connection closing after the answer (EPIPE).
        const oversized = await postDeclaringLength(deployment.gatewayUrl, '/api/missions', undefined, 2 * 1024 * 1024 + 16);
        const unknownRoute = await call(deployment.gatewayUrl, 'GET', '/api/nowhere');
        // The router decodes the path: so does the check (`/%61pi` is `/api`, `/%6Dcp` is `/mcp`).
        const encoded = await call(deployment.gatewayUrl, 'POST', '/%61pi/missions', { rawBody: '{"title":' });
        const encodedMcp = await call(deployment.gatewayUrl, 'POST', '/%6Dcp', { rawBody: '{"jsonrpc":' });
        for (const response of [malformed, foreign, oversized, unknownRoute, encoded, encodedMcp]) expectProblem(response, 401, 'unauthorized');
        // The API document stays public.
        expect((await call(deployment.gatewayUrl, 'GET', '/api/openapi.json')).status).toBe(200);
      });

      it('refuses a well-formed token signed by a key the issuer does not publish', async () => {
        const { privateKey, publicKey } = await generateKeyPair('ES256');
        const kid = (await exportJWK(publicKey)).kid ?? 'attacker';
        const forged = await new SignJWT({ scope: 'missions:read', tenant_id: tenantA.id, client_id: 'x' })
          .setProtectedHeader({ alg: 'ES256', typ: 'at+jwt', kid })
          .setIssuer(deployment.issuer)
          .setAudience(deployment.gatewayUrl)
          .setSubject('x')
          .setJti(randomUUID())
          .setIssuedAt()
          .setExpirationTime('1h')
          .sign(privateKey);
        const response = await call(deployment.gatewayUrl, 'GET', `/api/missions/${randomUUID()}`, { token: forged });
        expectProblem(response, 401, 'unauthorized');
      });

      it('refuses an unsigned token', async () => {
        const encode = (value: object): string => Buffer.from(JSON.stringify(value)).toString('base64url');
        const now = Math.floor(Date.now() / 1000);
        const unsigned = `${encode({ alg: 'none' })}.${encode({ iss: deployment.issuer, aud: deployment.gatewayUrl, sub: 'x', jti: 'j', iat: now, exp: now + 60, tenant_id: tenantA.id, scope: 'missions:read' })}.`;
        const response = await call(deployment.gatewayUrl, 'GET', `/api/missions/${randomUUID()}`, { token: unsigned });
        expectProblem(response, 401, 'unauthorized');
      });

      it('issues tenant tokens that expire in one hour and carry the tenant', async () => {
        const token = await clientCredentialsToken(deployment.issuer, tenantA.clientId, tenantA.clientSecret);
        expect(token.expires_in).toBe(3600);
        const claims = JSON.parse(Buffer.from(token.access_token.split('.')[1] ?? '', 'base64url').toString('utf8'));
        expect(claims).toMatchObject({ iss: deployment.issuer, aud: deployment.gatewayUrl, tenant_id: tenantA.id, client_id: tenantA.clientId });
        expect(claims.exp - claims.iat).toBe(3600);
      });

      it('answers 403 insufficient_scope naming the scope a narrower token lacks', async () => {
        const readOnly = await clientCredentialsToken(deployment.issuer, tenantA.clientId, tenantA.clientSecret, 'missions:read');
        const response = await call(deployment.gatewayUrl, 'POST', '/api/missions', { token: readOnly.access_token, body: { title: 'T', objective: 'O' } });
        expectProblem(response, 403, 'insufficient_scope');
        expect(response.headers.get('www-authenticate')).toContain('error="insufficient_scope"');
        expect(response.headers.get('www-authenticate')).toContain('scope="missions:write"');
        // A tenant request all the same: it carries the RateLimit fields (the rate-limit scenarios check it is counted).
        expect(response.headers.get('ratelimit-policy')).toMatch(/^"[a-z]+";q=\d+;w=60$/);
      });
    });

    describe('missions', () => {
      it('refuses a body nested too deep or holding a NUL with a 400 problem on every route, the identity provider a NUL id with a 401', async () => {
        // Sent as text: a value this deep is more than JSON.stringify (of the test, or of a server) can walk.
        const deep = (levels: number): string => `${'{"a":'.repeat(levels)}1${'}'.repeat(levels)}`;
        const hostile: Array<{ path: string; token: string; rawBody: string }> = [
          { path: '/api/missions', token: tenantA.token, rawBody: `{"title":"Deep","objective":"o","input":${deep(5_000)}}` },
          { path: '/api/missions', token: tenantA.token, rawBody: JSON.stringify({ title: 'Nul\u0000title', objective: 'o' }) },
          { path: '/api/missions', token: tenantA.token, rawBody: JSON.stringify({ title: 'Nul key', objective: 'o', metadata: { 'a\u0000b': 'c' } }) },
          {
            path: '/mcp',
            token: tenantA.token,
            rawBody: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"submit_mission","arguments":{"title":"t","objective":"o","input":${deep(5_000)}}}}`,
          },
          { path: '/admin/tenants', token: adminToken, rawBody: JSON.stringify({ name: 'Nul\u0000Corp', tier: 'starter' }) },
        ];
        for (const { path, token, rawBody } of hostile) {
          const response = await call(deployment.gatewayUrl, 'POST', path, { token, rawBody, headers: path === '/mcp' ? { accept: 'application/json, text/event-stream' } : {} });
          expect({ path, status: response.status, code: response.body?.code, field: response.body?.errors?.[0]?.field }).toEqual({
            path,
            status: 400,
            code: 'validation_failed',
            field: 'body',
          });
        }
        const token = await fetch(`${deployment.issuer}/token`, {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          body: 'grant_type=client_credentials&client_id=%00&client_secret=x',
        });
        expect({ status: token.status, error: ((await token.json()) as { error?: string }).error }).toEqual({ status: 401, error: 'invalid_client' });
      });

      it('answers headers past the limit with a 431 problem and Connection: close, and takes a long Brain query in a body', async () => {
        // 3,000 CJK characters: a legal query (up to 10,000 characters), 27 KB once percent-encoded in a URL.
        const longQuery = '電磁波の誘電率'.repeat(430).slice(0, 3_000);
        const target = `/api/brain/query?q=${encodeURIComponent(longQuery)}&k=3`;
        const raw = await rawExchange(deployment.gatewayUrl, `GET ${target} HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer ${tenantA.token}\r\n\r\n`);
        expect(raw.statusLine).toBe('HTTP/1.1 431 Request header fields too large');
        expect(raw.headers).toMatchObject({ 'content-type': 'application/problem+json', connection: 'close', 'x-request-id': expect.any(String) });
        expect(JSON.parse(raw.body)).toMatchObject({
          status: 431,
          code: 'headers_too_large',
          requestId: raw.headers['x-request-id'],
          detail: expect.stringContaining('POST /api/brain/query'),
        });
        expect(raw.closedByServer).toBe(true);
        // A brain:read client sends the same query in a body.
        const reader = await clientCredentialsToken(deployment.issuer, tenantA.clientId, tenantA.clientSecret, 'brain:read');
        const answered = await call(deployment.gatewayUrl, 'POST', '/api/brain/query', { token: reader.access_token, body: { q: longQuery, k: 3 } });
        expect(answered.status).toBe(200);
        expect(answered.body).toMatchObject({ query: longQuery, results: expect.any(Array) });
        expectProblem(await call(deployment.gatewayUrl, 'POST', '/api/brain/query', { token: reader.access_token, body: { q: '   ' } }), 400, 'validation_failed');
        expectProblem(await call(deployment.gatewayUrl, 'POST', '/api/brain/query', { token: reader.access_token, body: { q: 'x', k: 51 } }), 400, 'validation_failed');
        expectProblem(await call(deployment.gatewayUrl, 'POST', '/api/brain/query', { token: reader.access_token, body: { q: 'x', extra: true } }), 400, 'validation_failed');
        // The scope is the GET's: a token without brain:read is refused.
        const writer = await clientCredentialsToken(deployment.issuer, tenantA.clientId, tenantA.clientSecret, 'missions:write');
        expectProblem(await call(deployment.gatewayUrl, 'POST', '/api/brain/query', { token: writer.access_token, body: { q: 'x' } }), 403, 'insufficient_scope');
      });

      it('cuts off a request whose body never arrives in full with a 408 problem, and answers bytes that are not HTTP with a 400 problem', async () => {
        const started = Date.now();
        const slow = await rawExchange(
          deployment.gatewayUrl,
          `POST /api/missions HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer ${tenantA.token}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"title":`,
        );
        const waited = (Date.now() - started) / 1000;
        expect(slow.statusLine).toBe('HTTP/1.1 408 Request timeout');
        expect(JSON.parse(slow.body)).toMatchObject({ status: 408, code: 'request_timeout' });
        expect(slow.headers.connection).toBe('close');
        expect(waited).toBeGreaterThanOrEqual(deployment.requestTimeoutSeconds - 0.5);
        const garbage = await rawExchange(deployment.gatewayUrl, 'GET /api/missions HTTP/1.1\r\nHost gateway without a colon\r\n\r\n');
        expect(garbage.statusLine).toBe('HTTP/1.1 400 Malformed request');
        expect(JSON.parse(garbage.body)).toMatchObject({ status: 400, code: 'malformed_request', requestId: garbage.headers['x-request-id'] });
        expect(garbage.closedByServer).toBe(true);
      }, 30_000);

      it('answers an edited list cursor the database could not take with a 400 problem on every list', async () => {
        const id = '00000000-0000-4000-8000-000000000000';
        const cursors = ['0000-01-01T00:00:00Z', '2026-01-01T00:00:00-23:59', '2026-01-01T00:00:00.000000001Z'].map((at) =>
          Buffer.from(JSON.stringify({ v: 1, at, id }), 'utf8').toString('base64url'),
        );
        for (const path of ['/api/missions', '/api/hit', '/api/brain/documents']) {
          for (const cursor of cursors) {
            const response = await politeCall(deployment.gatewayUrl, 'GET', `${path}?cursor=${cursor}`, { token: tenantA.token });
            expect({ path, cursor, status: response.status, code: response.body.code }).toEqual({ path, cursor, status: 400, code: 'validation_failed' });
          }
        }
      });

      it('accepts a mission with 202 and a Location, runs the default Brain step and succeeds', async () => {
        const submitted = await call(deployment.gatewayUrl, 'POST', '/api/missions', {
          token: tenantA.token,
          body: { title: 'First mission', objective: 'Summarise what we know about microwave dielectrics', metadata: { team: 'rf' } },
        });
        expect(submitted.status).toBe(202);
        expect(submitted.headers.get('location')).toBe(`/api/missions/${submitted.body.id}`);
        expect(submitted.body).toMatchObject({ title: 'First mission', status: 'queued', metadata: { team: 'rf' } });
        expect(submitted.body.steps).toEqual([{ index: 0, type: 'brain.query', status: 'pending' }]);

        const done = await waitForMission(deployment.gatewayUrl, tenantA.token, submitted.body.id);
        expect(done).toMatchObject({
          id: submitted.body.id,
          status: 'succeeded',
          objective: 'Summarise what we know about microwave dielectrics',
          steps: [{ index: 0, type: 'brain.query', status: 'succeeded', output: { results: expect.any(Array) } }],
          result: { steps: [{ results: expect.any(Array) }] },
        });
        expect(Date.parse(done.completedAt)).toBeGreaterThanOrEqual(Date.parse(done.createdAt));
        expect(done.error).toBeUndefined();
      });

      it('runs several Brain steps in order', async () => {
        const submitted = await call(deployment.gatewayUrl, 'POST', '/api/missions', {
          token: tenantA.token,
          body: {
            title: 'Two queries',
            objective: 'O',
            steps: [
              { type: 'brain.query', query: 'first', k: 2 },
              { type: 'brain.query', query: 'second' },
            ],
          },
        });
        expect(submitted.status).toBe(202);
        const done = await waitForMission(deployment.gatewayUrl, tenantA.token, submitted.body.id);
        expect(done.status).toBe('succeeded');
        expect(done.steps.map((s: { status: string }) => s.status)).toEqual(['succeeded', 'succeeded']);
        expect(done.result.steps).toHaveLength(2);
      });

      it('hides a mission from every other tenant behind the same 404 as a missing one', async () => {
        const submitted = await call(deployment.gatewayUrl, 'POST', '/api/missions', { token: tenantA.token, body: { title: 'Private', objective: 'O' } });
        const fromB = await call(deployment.gatewayUrl, 'GET', `/api/missions/${submitted.body.id}`, { token: tenantB.token });
        const missing = await call(deployment.gatewayUrl, 'GET', `/api/missions/${randomUUID()}`, { token: tenantB.token });
        const malformed = await call(deployment.gatewayUrl, 'GET', `/api/missions/not-a-uuid'%20OR%201=1`, { token: tenantB.token });
        // However long, and even when it is not valid percent-encoding, a malformed id is not found.
        const long = await call(deployment.gatewayUrl, 'GET', `/api/missions/${'a'.repeat(300)}`, { token: tenantB.token });
        const longest = await call(deployment.gatewayUrl, 'GET', `/api/missions/${'a'.repeat(5_000)}`, { token: tenantB.token });
        const badEncoding = await call(deployment.gatewayUrl, 'GET', '/api/missions/%E0%A4%A', { token: tenantB.token });
        for (const response of [fromB, missing, malformed, long, longest, badEncoding]) expectProblem(response, 404, 'not_found');
        expect(fromB.body.detail).toBe(missing.body.detail);
        const fromA = await call(deployment.gatewayUrl, 'GET', `/api/missions/${submitted.body.id}`, { token: tenantA.token });
        expect(fromA.status).toBe(200);
      });

      it('holds titles to 200 characters and an approval’s description to 10,000', async () => {
        const at = (title: string, steps?: unknown[]) =>
          call(deployment.gatewayUrl, 'POST', '/api/missions', { token: tenantA.token, body: { title, objective: 'O', ...(steps ? { steps } : {}) } });
        const longest = await at('t'.repeat(200), [{ type: 'approval', title: 'a'.repeat(200), description: 'd'.repeat(10_000) }]);
        expect(longest.status).toBe(202);
        const tooLong = await at('t'.repeat(201), [{ type: 'approval', title: 'a'.repeat(201), description: 'd'.repeat(10_001) }]);
        expectProblem(tooLong, 400, 'validation_failed');
        expect(tooLong.body.errors.map((e: { field: string }) => e.field).sort()).toEqual(['steps.0.description', 'steps.0.title', 'title']);
        const cancelled = await call(deployment.gatewayUrl, 'POST', `/api/missions/${longest.body.id}/cancel`, { token: tenantA.token });
        expect(cancelled.status).toBe(200);
      });

      it('lists every invalid field with 400', async () => {
        const response = await call(deployment.gatewayUrl, 'POST', '/api/missions', {
          token: tenantA.token,
          body: { title: '', objective: 'O', steps: [{ type: 'brain.query', k: 99 }], surprise: true },
        });
        expectProblem(response, 400, 'validation_failed');
        expect(response.body.errors.map((e: { field: string }) => e.field).sort()).toEqual(['steps.0.k', 'surprise', 'title']);
      });

      it('answers malformed JSON with 400, a non-JSON body with 415 and an oversized body with 413', async () => {
        const malformed = await call(deployment.gatewayUrl, 'POST', '/api/missions', { token: tenantA.token, rawBody: '{"title": "T",' });
        expectProblem(malformed, 400, 'malformed_json');
        const text = await call(deployment.gatewayUrl, 'POST', '/api/missions', { token: tenantA.token, rawBody: 'title=T', contentType: 'text/plain' });
        expectProblem(text, 415, 'unsupported_media_type');
        expectProblem(await postDeclaringLength(deployment.gatewayUrl, '/api/missions', tenantA.token, 1024 * 1024 + 1), 413, 'payload_too_large');
      });

      it('refuses a body that is not UTF-8, declared by length or sent chunked, and takes the same text when it is', async () => {
        const prefix = Buffer.from('{"title":"T');
        const body = (middle: Buffer): Buffer => Buffer.concat([prefix, middle, Buffer.from('","objective":"O"}')]);
        // A byte no UTF-8 sequence starts with, and a lone surrogate encoded as if it were a character.
        for (const bad of [Buffer.from([0xff, 0xfe]), Buffer.from([0xed, 0xa0, 0x80])]) {
          for (const splitAt of [undefined, prefix.length + 1]) {
            const refused = await postBytes(deployment.gatewayUrl, '/api/missions', tenantA.token, body(bad), splitAt);
            expectProblem(refused, 400, 'malformed_json');
          }
        }
        // Multi-byte characters cut between the two chunks are one text again.
        const accepted = await postBytes(deployment.gatewayUrl, '/api/missions', tenantA.token, body(Buffer.from('é✓😀', 'utf8')), prefix.length + 1);
        expect(accepted.status).toBe(202);
        const read = await call(deployment.gatewayUrl, 'GET', `/api/missions/${accepted.body.id}`, { token: tenantA.token });
        expect(read.body.title).toBe('Té✓😀');
      });

      it('echoes a sane X-Request-Id and replaces an unsafe one', async () => {
        const sane = await call(deployment.gatewayUrl, 'GET', '/health/live', { headers: { 'x-request-id': 'client-req-42' } });
        expect(sane.headers.get('x-request-id')).toBe('client-req-42');
        const unsafe = await call(deployment.gatewayUrl, 'GET', '/health/live', { headers: { 'x-request-id': 'bad id\twith spaces' } });
        expect(unsafe.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
        const missing = await call(deployment.gatewayUrl, 'GET', '/no/such/route');
        expectProblem(missing, 404, 'not_found');
      });
    });

    describeApprovalScenarios(context);
    describeDeadlineAndAssigneeScenarios(context);
    describeBrainScenarios(context);
    describeEventScenarios(context);
    describeWebhookScenarios(context);
    describeOperatorScenarios(context);
    describeIsolationScenarios(context);
    describeRateLimitScenarios(context);
    describeKeyRotationScenarios(context);
    describeMcpScenarios(context);
    describeOpenApiScenarios(context);

    describe('operations', () => {
      it('reports liveness and readiness on the public port without details, and the details on the operations port', async () => {
        expect((await call(deployment.gatewayUrl, 'GET', '/health/live')).status).toBe(200);
        const publicReady = await call(deployment.gatewayUrl, 'GET', '/health/ready');
        expect(publicReady.status).toBe(200);
        expect(publicReady.body).toEqual({ status: 'up' });
        const ready = await call(deployment.opsUrl, 'GET', '/health/ready');
        expect(ready.status).toBe(200);
        expect(ready.body.status).toBe('up');
        expect(ready.body.details.bus.up).toBe(true);
        expect(Object.keys(ready.body.details).sort()).toEqual([...deployment.readinessParts].sort());
        for (const part of deployment.readinessParts) expect(ready.body.details[part].up).toBe(true);
        // The idp's signing keys can be fetched: tokens can be checked.
        expect(ready.body.details.identityProvider.up).toBe(true);
        // The identity provider's public port answers up or down, nothing more, and no metrics.
        expect((await call(deployment.issuer, 'GET', '/health/ready')).body).toEqual({ status: 'up' });
        expect((await call(deployment.issuer, 'GET', '/metrics')).status).toBe(404);
      });

      it('serves Prometheus metrics by route template and status, bus traffic by topic, and never a tenant id', async () => {
        const missionId = (await call(deployment.gatewayUrl, 'POST', '/api/missions', { token: tenantA.token, body: { title: 'Metrics', objective: 'Count me' } })).body.id;
        expect((await call(deployment.gatewayUrl, 'GET', `/api/missions/${missionId}`, { token: tenantA.token })).status).toBe(200);
        expect((await call(deployment.gatewayUrl, 'GET', '/api/missions/no-such-mission', { token: tenantA.token })).status).toBe(404);
        // Not on the public port: what the platform does is for its operators only.
        expect((await call(deployment.gatewayUrl, 'GET', '/metrics')).status).toBe(404);
        const response = await call(deployment.opsUrl, 'GET', '/metrics');
        expect(response.status).toBe(200);
        expect(response.headers.get('content-type')).toContain('text/plain');
        const text = response.body as string;
        expect(sample(text, 'http_server_request_duration_seconds_count', { method: 'GET', route: '/api/missions/:id', status_code: '200' })).toBeGreaterThanOrEqual(1);
        expect(sample(text, 'http_server_request_duration_seconds_count', { method: 'GET', route: '/api/missions/:id', status_code: '404' })).toBeGreaterThanOrEqual(1);
        expect(sample(text, 'http_server_request_duration_seconds_count', { method: 'POST', route: '/api/missions', status_code: '202' })).toBeGreaterThanOrEqual(1);
        // The gateway's side of the bus: sends on Kafka, handling in the all-in-one process.
        const sends = sample(text, 'bus_send_duration_seconds_count', { topic: 'mission.requests.v1', result: 'ok' }) ?? 0;
        const handled = sample(text, 'bus_handle_duration_seconds_count', { topic: 'mission.requests.v1', outcome: 'ok' }) ?? 0;
        expect(sends + handled).toBeGreaterThanOrEqual(2);
        expect(sample(text, 'rate_limit_decisions_total', { decision: 'allowed' })).toBeGreaterThan(0);
        expect(text).not.toContain(tenantA.id);
        expect(text).not.toContain(missionId);
        expect(text).not.toContain('no-such-mission');
      });
    });
  });
}
