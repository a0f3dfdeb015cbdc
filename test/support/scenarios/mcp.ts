import { randomUUID } from 'node:crypto';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { Client as V1Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as V1Transport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { z } from 'zod';
import { SubmitMissionSchema } from '@mission/contracts';
import { call, clientCredentialsToken, eventually, politeCall, politeFetch } from '../api-client';
import type { ScenarioContext, Tenant } from '../gateway-scenarios';
import { expectProblem } from '../gateway-scenarios';
import { ensureUser, userToken } from '../user-token';

const TOOL_NAMES = ['submit_mission', 'get_mission', 'wait_for_mission', 'list_missions', 'query_brain', 'ingest_document', 'list_pending_hits', 'approve_hit', 'reject_hit'];

/** The three clients the endpoint must serve: SDK v1 (2025-11-25), SDK v2 speaking 2025-11-25, SDK v2 speaking 2026-07-28. */
type ClientKind = 'v1' | 'v2-legacy' | 'v2-2026';

interface ToolOutcome {
  readonly isError: boolean;
  readonly body: any;
}

interface McpSession {
  readonly protocolVersion: string | undefined;
  listTools(): Promise<Array<{ name: string; description?: string; inputSchema: Record<string, unknown>; outputSchema?: Record<string, unknown> }>>;
  call(name: string, args: Record<string, unknown>): Promise<ToolOutcome>;
  close(): Promise<void>;
}

function outcome(result: any): ToolOutcome {
  const text = result.content?.find((item: { type: string }) => item.type === 'text')?.text;
  if (result.isError === true) {
    // A failure's problem details are its text; structured content is only what outputSchema describes.
    expect(result.structuredContent).toBeUndefined();
    return { isError: true, body: JSON.parse(text) };
  }
  // Structured content and the text block carry the same body.
  expect(JSON.parse(text)).toEqual(result.structuredContent);
  return { isError: false, body: result.structuredContent };
}

async function connect(kind: ClientKind, url: string, token: string): Promise<McpSession> {
  const requestInit = { headers: { authorization: `Bearer ${token}` } };
  // Sessions poll (missionIn): a 429 is retried after its Retry-After. The rate-limit test posts raw requests instead.
  const fetch = politeFetch();
  if (kind === 'v1') {
    const client = new V1Client({ name: 'mission-service-tests-v1', version: '1.0.0' });
    const transport = new V1Transport(new URL(url), { requestInit, fetch });
    await client.connect(transport);
    // Listing the tools makes the client check every result's structured content against the tool's outputSchema.
    await client.listTools();
    return {
      protocolVersion: transport.protocolVersion,
      listTools: async () => (await client.listTools()).tools,
      call: async (name, args) => outcome(await client.callTool({ name, arguments: args })),
      close: () => client.close(),
    };
  }
  const client = new Client({ name: 'mission-service-tests-v2', version: '1.0.0' }, { versionNegotiation: { mode: kind === 'v2-2026' ? { pin: '2026-07-28' } : 'legacy' } });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit, fetch }));
  await client.listTools();
  return {
    protocolVersion: client.getNegotiatedProtocolVersion(),
    listTools: async () => (await client.listTools()).tools,
    call: async (name, args) => outcome(await client.callTool({ name, arguments: args })),
    close: () => client.close(),
  };
}

/** A raw JSON-RPC POST, for what the SDK clients hide (HTTP status and headers). */
function rawPost(url: string, token: string | undefined, message: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...headers,
    },
    body: JSON.stringify(message),
  });
}

const toolsCall = (name: string, args: Record<string, unknown>) => ({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } });

/** MCP at /mcp: the same operations, auth, scopes, tenancy and rate limit as REST, for SDK clients of both protocol revisions. */
export function describeMcpScenarios(context: ScenarioContext): void {
  const gateway = (): string => context.deployment.gatewayUrl;
  const mcpUrl = (): string => `${gateway()}/mcp`;

  async function tokenWith(tenant: Tenant, scopes: string[]): Promise<string> {
    const client = await call(gateway(), 'POST', `/admin/tenants/${tenant.id}/clients`, { token: context.adminToken, body: { scopes } });
    expect(client.status).toBe(201);
    return (await clientCredentialsToken(context.deployment.issuer, client.body.clientId, client.body.clientSecret)).access_token;
  }

  async function withSession<T>(kind: ClientKind, token: string, work: (session: McpSession) => Promise<T>): Promise<T> {
    const session = await connect(kind, mcpUrl(), token);
    try {
      return await work(session);
    } finally {
      await session.close();
    }
  }

  async function missionIn(session: McpSession, id: string, accept: (mission: any) => boolean, what: string): Promise<any> {
    return eventually(async () => {
      const got = await session.call('get_mission', { id });
      expect(got.isError).toBe(false);
      return accept(got.body) ? got.body : undefined;
    }, what);
  }

  describe('MCP', () => {
    describe.each<[ClientKind, string]>([
      ['v1', '2025-11-25'],
      ['v2-legacy', '2025-11-25'],
      ['v2-2026', '2026-07-28'],
    ])('with the %s SDK client', (kind, revision) => {
      it(`speaks ${revision} and lists every tool with the JSON Schema of its REST contract`, async () => {
        await withSession(kind, context.tenantA.token, async (session) => {
          expect(session.protocolVersion).toBe(revision);
          const tools = await session.listTools();
          expect(tools.map((tool) => tool.name).sort()).toEqual([...TOOL_NAMES].sort());
          for (const tool of tools) expect(tool.description?.length).toBeGreaterThan(60);
          const submit = tools.find((tool) => tool.name === 'submit_mission');
          const { $schema: _ignored, ...contract } = z.toJSONSchema(SubmitMissionSchema, { io: 'input' }) as Record<string, unknown>;
          expect(submit?.inputSchema).toMatchObject(contract);
          // Every tool describes its result: the REST response body's schema, an object at the root.
          for (const tool of tools) expect({ tool: tool.name, type: tool.outputSchema?.type }).toEqual({ tool: tool.name, type: 'object' });
          expect(submit?.outputSchema).toMatchObject({ required: expect.arrayContaining(['id', 'status', 'steps', 'createdAt']) });
          expect(tools.find((tool) => tool.name === 'list_pending_hits')?.outputSchema).toMatchObject({ required: ['items', 'nextCursor'] });
        });
      });

      it('runs a mission with an approval through tools alone, and REST shows the same mission', async () => {
        const decision = kind === 'v1' ? 'reject_hit' : 'approve_hit';
        await withSession(kind, context.tenantA.token, async (session) => {
          const submitted = await session.call('submit_mission', {
            title: `Through MCP (${kind})`,
            objective: 'Let an agent drive it',
            steps: [
              { type: 'brain.query', query: 'anything' },
              { type: 'approval', title: `Agent asks (${kind})` },
            ],
          });
          expect(submitted).toMatchObject({ isError: false, body: { status: 'queued', title: `Through MCP (${kind})` } });
          const id = submitted.body.id as string;

          const waiting = await missionIn(session, id, (m) => m.status === 'awaiting_approval', 'the mission to await approval');
          const hitId = waiting.steps[1].hitId as string;
          const pending = await session.call('list_pending_hits', { limit: 100 });
          expect(pending.isError).toBe(false);
          expect(pending.body.items.map((item: { id: string }) => item.id)).toContain(hitId);

          // Waiting while nobody decides: the mission comes back as it is when the timeout passes.
          const started = Date.now();
          const early = await session.call('wait_for_mission', { id, timeoutSeconds: 1 });
          expect(early).toMatchObject({ isError: false, body: { id, status: 'awaiting_approval' } });
          expect(Date.now() - started).toBeGreaterThanOrEqual(900);

          const decided = await session.call(decision, { id: hitId, comment: 'decided by an agent' });
          expect(decided).toMatchObject({ isError: false, body: { id: hitId, status: kind === 'v1' ? 'rejected' : 'approved', comment: 'decided by an agent' } });
          const again = await session.call(decision, { id: hitId });
          expect(again).toMatchObject({ isError: true, body: { status: 409, code: 'conflict' } });

          // Waiting for the end: the answer comes when the mission is final, not when the timeout passes.
          const waited = await session.call('wait_for_mission', { id, timeoutSeconds: 60 });
          expect(waited.isError).toBe(false);
          const final = waited.body;
          expect(final.status).toBe(kind === 'v1' ? 'rejected' : 'succeeded');
          const rest = await call(gateway(), 'GET', `/api/missions/${id}`, { token: context.tenantA.token });
          expect(rest.status).toBe(200);
          expect(final).toEqual(rest.body);
          // Final and read: later reads are answered from mission-service's cache (one immutable
          // value, shared by the in-process bus and encoded once), through both doors alike.
          for (let read = 0; read < 2; read += 1) {
            expect((await session.call('get_mission', { id })).body).toEqual(rest.body);
            expect((await call(gateway(), 'GET', `/api/missions/${id}`, { token: context.tenantA.token })).body).toEqual(rest.body);
          }
          const listed = await session.call('list_missions', { status: final.status, limit: 100 });
          expect(listed.body.items.find((m: { id: string }) => m.id === id)).toEqual(rest.body);
        });
      });
    });

    it('takes deadlines and assignees through tools: assignedTo "me" lists the user’s items, and only an assignee decides', async () => {
      await ensureUser(gateway(), context.adminToken, context.tenantA.id, 'ada');
      const ada = await userToken(context.deployment, context.tenantA, 'ada');
      await withSession('v2-2026', ada, async (asAda) => {
        const submitted = await asAda.call('submit_mission', {
          title: 'Assigned through MCP',
          objective: 'Only Ada decides',
          steps: [{ type: 'approval', title: 'Ada?', expiresIn: 3_600, onExpiry: 'fail', assignees: ['Ada'] }],
        });
        expect(submitted.isError).toBe(false);
        const waiting = await missionIn(asAda, submitted.body.id, (m) => m.status === 'awaiting_approval', 'the mission to await approval');
        const hitId = waiting.steps[0].hitId as string;
        const mine = await asAda.call('list_pending_hits', { assignedTo: 'me', limit: 100 });
        expect(mine.isError).toBe(false);
        expect(mine.body.items.find((item: { id: string }) => item.id === hitId)).toMatchObject({ assignees: ['ada'], expiresAt: expect.any(String) });

        await withSession('v2-2026', context.tenantA.token, async (asClient) => {
          expect(await asClient.call('approve_hit', { id: hitId })).toMatchObject({ isError: true, body: { status: 403, code: 'not_an_assignee' } });
          expect(await asClient.call('list_pending_hits', { assignedTo: 'me' })).toMatchObject({ isError: true, body: { status: 403, code: 'not_an_assignee' } });
        });
        expect(await asAda.call('approve_hit', { id: hitId, comment: 'mine' })).toMatchObject({ isError: false, body: { id: hitId, status: 'approved', comment: 'mine' } });
      });
    });

    it('answers ingest_document and query_brain as REST does', async () => {
      await withSession('v2-2026', context.tenantA.token, async (session) => {
        const ingested = await session.call('ingest_document', { title: 'Heliotrope handbook', content: 'Heliotrope seedlings need quartzite gravel and patience.' });
        expect(ingested).toMatchObject({ isError: false, body: { title: 'Heliotrope handbook', chunkCount: 1 } });
        const viaMcp = await session.call('query_brain', { q: 'quartzite heliotrope', k: 3 });
        const viaRest = await call(gateway(), 'GET', '/api/brain/query?q=quartzite%20heliotrope&k=3', { token: context.tenantA.token });
        expect(viaMcp.isError).toBe(false);
        expect(viaMcp.body).toEqual(viaRest.body);
        expect(viaMcp.body.results[0].documentId).toBe(ingested.body.id);
      });
    });

    it('returns validation failures as tool results carrying the problem details REST would send', async () => {
      await withSession('v2-2026', context.tenantA.token, async (session) => {
        const invalid = { title: 'x', objective: 'y', steps: [{ type: 'approval' }], colour: 'red' };
        const viaMcp = await session.call('submit_mission', invalid);
        const viaRest = await call(gateway(), 'POST', '/api/missions', { token: context.tenantA.token, body: invalid });
        expect(viaMcp.isError).toBe(true);
        expect(viaMcp.body).toMatchObject({ status: 400, code: 'validation_failed', instance: '/mcp#submit_mission' });
        expect(viaMcp.body.errors).toEqual(viaRest.body.errors);
        expect(viaMcp.body.errors.map((e: { field: string }) => e.field)).toEqual(expect.arrayContaining(['steps.0.title', 'colour']));

        const tooMany = await session.call('query_brain', { q: 'x', k: 51 });
        expect(tooMany).toMatchObject({ isError: true, body: { status: 400, errors: [{ field: 'k' }] } });
        const missingId = await session.call('get_mission', {});
        expect(missingId).toMatchObject({ isError: true, body: { status: 400, code: 'validation_failed' } });
        const extra = await session.call('get_mission', { id: randomUUID(), colour: 'red' });
        expect(extra).toMatchObject({ isError: true, body: { status: 400, code: 'validation_failed', errors: [{ field: 'colour', message: 'unknown field' }] } });
        // A malformed id, however long, is simply not found (as over REST).
        expect(await session.call('get_mission', { id: 'x'.repeat(300) })).toMatchObject({ isError: true, body: { status: 404, code: 'not_found' } });
      });
    });

    it("treats another tenant's missions and HIT items as unknown", async () => {
      const foreign = await call(gateway(), 'POST', '/api/missions', {
        token: context.tenantB.token,
        body: { title: 'Tenant B only', objective: 'Stay private', steps: [{ type: 'approval', title: 'B decides' }] },
      });
      expect(foreign.status).toBe(202);
      const hitId = await eventually(async () => {
        const mission = await politeCall(gateway(), 'GET', `/api/missions/${foreign.body.id}`, { token: context.tenantB.token });
        return mission.body.steps[0].hitId as string | undefined;
      }, 'tenant B’s HIT item');

      await withSession('v2-2026', context.tenantA.token, async (session) => {
        expect(await session.call('get_mission', { id: foreign.body.id })).toMatchObject({ isError: true, body: { status: 404, code: 'not_found' } });
        expect(await session.call('approve_hit', { id: hitId })).toMatchObject({ isError: true, body: { status: 404, code: 'not_found' } });
        const missions = await session.call('list_missions', { limit: 100 });
        expect(missions.body.items.map((m: { id: string }) => m.id)).not.toContain(foreign.body.id);
        const hits = await session.call('list_pending_hits', { limit: 100 });
        expect(hits.body.items.map((h: { id: string }) => h.id)).not.toContain(hitId);
      });
      const stillPending = await call(gateway(), 'GET', `/api/hit/${hitId}`, { token: context.tenantB.token });
      expect(stillPending.body.status).toBe('pending');
    });

    it('answers 401 with the protected-resource metadata that names the authorization server', async () => {
      const response = await rawPost(mcpUrl(), undefined, { jsonrpc: '2.0', id: 1, method: 'tools/list' });
      expect(response.status).toBe(401);
      const challenge = response.headers.get('www-authenticate') ?? '';
      const metadataUrl = /resource_metadata="([^"]+)"/.exec(challenge)?.[1];
      expect(metadataUrl).toBe(`${gateway()}/.well-known/oauth-protected-resource`);
      const metadata = await call(gateway(), 'GET', new URL(metadataUrl as string).pathname);
      expect(metadata.body).toMatchObject({ resource: gateway(), authorization_servers: [context.deployment.issuer] });

      const forged = await rawPost(mcpUrl(), 'not.a.jwt', { jsonrpc: '2.0', id: 1, method: 'tools/list' });
      expect(forged.status).toBe(401);
      expect(forged.headers.get('www-authenticate')).toContain('error="invalid_token"');

      // Tokens only in the Authorization header: one in the query string is no token.
      const inQuery = await rawPost(`${mcpUrl()}?access_token=${encodeURIComponent(context.tenantA.token)}`, undefined, { jsonrpc: '2.0', id: 1, method: 'tools/list' });
      expect(inQuery.status).toBe(401);
      expect(inQuery.headers.get('www-authenticate')).not.toContain('error=');
    });

    it('refuses a tool whose scope the token lacks with 403 insufficient_scope, and runs the ones it has', async () => {
      const readOnly = await tokenWith(context.tenantA, ['hits:read', 'missions:read']);
      const refused = await rawPost(mcpUrl(), readOnly, toolsCall('approve_hit', { id: '00000000-0000-4000-8000-000000000000' }));
      expect(refused.status).toBe(403);
      expect(refused.headers.get('www-authenticate')).toMatch(/error="insufficient_scope".*scope="hits:approve"/);
      expectProblem({ status: refused.status, headers: refused.headers, body: await refused.json() }, 403, 'insufficient_scope');

      await withSession('v2-2026', readOnly, async (session) => {
        const listed = await session.call('list_pending_hits', {});
        expect(listed.isError).toBe(false);
        expect(Array.isArray(listed.body.items)).toBe(true);
        expect(listed.body.nextCursor === null || typeof listed.body.nextCursor === 'string').toBe(true);
        await expect(session.call('submit_mission', { title: 't', objective: 'o' })).rejects.toThrow(/insufficient scope: required "missions:write"/i);
      });
    });

    it("acts with the submitter's authority: a mission that reads the Brain needs brain:read, through REST and MCP alike", async () => {
      const noBrain = await tokenWith(context.tenantA, ['missions:read', 'missions:write']);
      // The default step is a Brain query on the objective: it would show the caller passages it may not read.
      for (const body of [
        { title: 'Default step', objective: 'survey' },
        { title: 'Explicit step', objective: 'o', steps: [{ type: 'brain.query', query: 'survey' }] },
      ]) {
        const refused = await call(gateway(), 'POST', '/api/missions', { token: noBrain, body });
        expect(refused.status).toBe(403);
        expect(refused.headers.get('www-authenticate')).toMatch(/error="insufficient_scope".*scope="brain:read"/);
        expect(refused.body).toMatchObject({ code: 'insufficient_scope' });
      }
      // A mission whose steps read nothing is the caller's to submit.
      const approvalOnly = await call(gateway(), 'POST', '/api/missions', {
        token: noBrain,
        body: { title: 'Approval only', objective: 'o', steps: [{ type: 'approval', title: 'Sign off' }] },
      });
      expect(approvalOnly.status).toBe(202);
      await withSession('v2-2026', noBrain, async (session) => {
        const tool = await session.call('submit_mission', { title: 'Through MCP', objective: 'survey' });
        expect(tool.isError).toBe(true);
        expect(tool.body).toMatchObject({ status: 403, code: 'insufficient_scope' });
      });
      const listed = await call(gateway(), 'GET', '/api/missions?limit=100', { token: noBrain });
      expect(listed.body.items.filter((mission: { title: string }) => ['Default step', 'Explicit step', 'Through MCP'].includes(mission.title))).toEqual([]);
    });

    it('refuses browser origins other than its own', async () => {
      const foreign = await rawPost(mcpUrl(), context.tenantA.token, { jsonrpc: '2.0', id: 1, method: 'tools/list' }, { origin: 'https://evil.example' });
      expect(foreign.status).toBe(403);
      // However the path is spelled (the router decodes it).
      const encoded = await rawPost(`${gateway()}/%6Dcp`, context.tenantA.token, { jsonrpc: '2.0', id: 1, method: 'tools/list' }, { origin: 'https://evil.example' });
      expect(encoded.status).toBe(403);
      expect(((await foreign.json()) as { code: string }).code).toBe('forbidden');
      // Before authentication: a page from another origin learns nothing about tokens, and spends no budget.
      const anonymous = await rawPost(mcpUrl(), '', { jsonrpc: '2.0', id: 1, method: 'tools/list' }, { origin: 'https://evil.example' });
      expect(anonymous.status).toBe(403);
      expect(anonymous.headers.get('ratelimit')).toBeNull();
      const own = await rawPost(mcpUrl(), context.tenantA.token, { jsonrpc: '2.0', id: 1, method: 'tools/list' }, { origin: new URL(gateway()).origin });
      expect(own.status).toBe(200);
      // Read to its end: the list is large, and an answer left unread holds its connection open
      // past the server's exit (the test process then cannot exit cleanly).
      expect(await own.text()).toContain('"submit_mission"');
    });

    it('refuses a JSON-RPC batch with a 400 problem, running none of its calls, for the one token its request took', async () => {
      const created = await call(gateway(), 'POST', '/admin/tenants', { token: context.adminToken, body: { name: 'MCP batcher', tier: 'starter' } });
      expect(created.status).toBe(201);
      const token = (await clientCredentialsToken(context.deployment.issuer, created.body.client.clientId, created.body.client.clientSecret)).access_token;
      const remaining = (response: Response): number => Number(/;r=(\d+)/.exec(response.headers.get('ratelimit') ?? '')?.[1]);
      const before = await rawPost(mcpUrl(), token, { jsonrpc: '2.0', id: 0, method: 'tools/list' });
      expect(before.status).toBe(200);
      await before.arrayBuffer();
      const batch = Array.from({ length: 40 }, (_, index) => ({
        jsonrpc: '2.0',
        id: index + 1,
        method: 'tools/call',
        params: { name: 'submit_mission', arguments: { title: `Batched ${index}`, objective: 'o' } },
      }));
      const refused = await rawPost(mcpUrl(), token, batch);
      expect(refused.status).toBe(400);
      expect(refused.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(await refused.json()).toMatchObject({ code: 'validation_failed', errors: [{ field: 'body' }] });
      // It took one token, as any request does (starter refills 1.67 a second: the next request shows at most one more).
      expect(remaining(before) - remaining(refused)).toBeGreaterThanOrEqual(1);
      expect(remaining(before) - remaining(refused)).toBeLessThanOrEqual(2);
      // And none of its forty submissions happened.
      const missions = await call(gateway(), 'GET', '/api/missions', { token });
      expect(missions.status).toBe(200);
      expect(missions.body.items).toEqual([]);
    });

    it("counts tool calls against the tenant's rate limit, shared with REST", async () => {
      const created = await call(gateway(), 'POST', '/admin/tenants', { token: context.adminToken, body: { name: 'MCP starter', tier: 'starter' } });
      expect(created.status).toBe(201);
      const token = (await clientCredentialsToken(context.deployment.issuer, created.body.client.clientId, created.body.client.clientSecret)).access_token;
      // Starter: a bucket of 18 refilled at 100/min; 30 quick calls must run it dry.
      const statuses: number[] = [];
      let limited: Response | undefined;
      for (let i = 0; i < 30; i++) {
        // Tool calls and discovery alike take from the budget.
        const message = i % 2 === 0 ? { method: 'tools/call', params: { name: 'list_missions', arguments: {} } } : { method: 'tools/list' };
        const response = await rawPost(mcpUrl(), token, { jsonrpc: '2.0', id: i, ...message });
        statuses.push(response.status);
        if (response.status === 429) limited = response;
        else await response.arrayBuffer();
      }
      expect(statuses.filter((status) => status === 200).length).toBeGreaterThanOrEqual(18);
      expect(limited).toBeDefined();
      expect(Number(limited?.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(limited?.headers.get('ratelimit-policy')).toBe('"starter";q=100;w=60');
      expect(((await limited?.json()) as { code: string }).code).toBe('rate_limited');
      // The same bucket refuses REST now (it refills 1.67 tokens a second: a few at once cannot all pass).
      const rest = await Promise.all(Array.from({ length: 5 }, () => call(gateway(), 'GET', '/api/missions', { token })));
      expect(rest.map((response) => response.status)).toContain(429);
    });
  });
}
