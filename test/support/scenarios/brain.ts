import { randomUUID } from 'node:crypto';
import { type ApiResponse, call, clientCredentialsToken, postDeclaringLength, waitForMission } from '../api-client';
import type { ScenarioContext, Tenant } from '../gateway-scenarios';
import { expectProblem } from '../gateway-scenarios';

const MIB = 1024 * 1024;

/** The Brain through the gateway: documents, queries, limits, isolation, and missions that use it. */
export function describeBrainScenarios(context: ScenarioContext): void {
  const gateway = (): string => context.deployment.gatewayUrl;
  // Tenants of their own with a high limit, so these requests never meet the rate limit of the shared ones.
  let owner: Tenant;
  let stranger: Tenant;

  async function enterpriseTenant(name: string): Promise<Tenant> {
    const created = await call(gateway(), 'POST', '/admin/tenants', { token: context.adminToken, body: { name, tier: 'enterprise', rpm: 100_000 } });
    expect(created.status).toBe(201);
    const { clientId, clientSecret } = created.body.client;
    return { id: created.body.id, token: (await clientCredentialsToken(context.deployment.issuer, clientId, clientSecret)).access_token, clientId, clientSecret };
  }

  const ingest = (tenant: Tenant, body: unknown) => call(gateway(), 'POST', '/api/brain/documents', { token: tenant.token, body });
  const query = (tenant: Tenant, params: string) => call(gateway(), 'GET', `/api/brain/query?${params}`, { token: tenant.token });

  describe('brain', () => {
    beforeAll(async () => {
      owner = await enterpriseTenant('Brain owner');
      stranger = await enterpriseTenant('Brain stranger');
    }, 60_000);

    it('ingests, lists, shows, queries and deletes a document', async () => {
      const created = await ingest(owner, {
        title: 'Ferrite devices',
        content: 'Ferrite isolators pass microwave power in one direction.\n\nCirculators route it between three ports.',
        source: 'https://example.org/ferrites',
        metadata: { shelf: 'rf' },
      });
      expect(created.status).toBe(201);
      expect(created.body).toEqual({ id: expect.any(String), title: 'Ferrite devices', chunkCount: 1, createdAt: expect.any(String) });
      expect(created.headers.get('location')).toBe(`/api/brain/documents/${created.body.id}`);
      const { id } = created.body;

      const shown = await call(gateway(), 'GET', `/api/brain/documents/${id}`, { token: owner.token });
      expect(shown.status).toBe(200);
      expect(shown.body).toEqual({ ...created.body, source: 'https://example.org/ferrites', metadata: { shelf: 'rf' }, contentBytes: expect.any(Number) });
      const listed = await call(gateway(), 'GET', '/api/brain/documents', { token: owner.token });
      expect(listed.status).toBe(200);
      expect(listed.body.items.map((item: { id: string }) => item.id)).toContain(id);

      const answer = await query(owner, 'q=circulators%20ports&k=3');
      expect(answer.status).toBe(200);
      expect(answer.body.query).toBe('circulators ports');
      expect(answer.body.results[0]).toEqual({
        documentId: id,
        chunkId: expect.any(String),
        title: 'Ferrite devices',
        text: 'Ferrite isolators pass microwave power in one direction.\n\nCirculators route it between three ports.',
        score: expect.any(Number),
        source: 'https://example.org/ferrites',
      });

      const deleted = await call(gateway(), 'DELETE', `/api/brain/documents/${id}`, { token: owner.token });
      expect(deleted.status).toBe(204);
      expectProblem(await call(gateway(), 'GET', `/api/brain/documents/${id}`, { token: owner.token }), 404, 'not_found');
      expectProblem(await call(gateway(), 'DELETE', `/api/brain/documents/${id}`, { token: owner.token }), 404, 'not_found');
      expect((await query(owner, 'q=circulators')).body.results).toEqual([]);
    });

    it('ranks the passage that is about the query first, best first', async () => {
      const topic = `zeolite${randomUUID().slice(0, 8)}`;
      const strong = await ingest(owner, { title: `${topic} catalysts`, content: `The ${topic} lattice traps molecules; ${topic} catalysts crack oil.` });
      const weak = await ingest(owner, {
        title: 'Refineries',
        content: `Refineries crack crude oil into fuels, sometimes over a ${topic} bed among many other catalysts and furnaces.`,
      });
      const answer = await query(owner, `q=${topic}&k=5`);
      expect(answer.body.results.map((r: { documentId: string }) => r.documentId)).toEqual([strong.body.id, weak.body.id]);
      expect(answer.body.results[0].score).toBeGreaterThan(answer.body.results[1].score);
    });

    it('returns 5 passages when k is not given, and lists 20 documents when limit is not given', async () => {
      const tenant = await enterpriseTenant('Brain defaults');
      const topic = `basalt${randomUUID().slice(0, 8)}`;
      for (let n = 0; n < 22; n++) expect((await ingest(tenant, { title: `Note ${n}`, content: `Field note ${n} on ${topic} columns.` })).status).toBe(201);
      const answer = await query(tenant, `q=${topic}`);
      expect(answer.status).toBe(200);
      expect(answer.body.results).toHaveLength(5);
      const page = await call(gateway(), 'GET', '/api/brain/documents', { token: tenant.token });
      expect(page.body.items).toHaveLength(20);
      expect(typeof page.body.nextCursor).toBe('string');
    });

    it('pages through documents newest first with an opaque cursor, and validates the page parameters', async () => {
      const tenant = await enterpriseTenant('Brain pager');
      const ids: string[] = [];
      for (let n = 0; n < 3; n++) ids.push((await ingest(tenant, { title: `Page ${n}`, content: `Document number ${n}.` })).body.id);
      const seen: string[] = [];
      let cursor: string | null = null;
      do {
        const page: any = await call(gateway(), 'GET', `/api/brain/documents?limit=1${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`, { token: tenant.token });
        expect(page.status).toBe(200);
        expect(page.body.items).toHaveLength(1);
        seen.push(page.body.items[0].id);
        cursor = page.body.nextCursor;
      } while (cursor);
      expect(seen).toEqual([...ids].reverse());

      for (const params of ['limit=0', 'limit=101', 'limit=ten', 'cursor=not-a-cursor', 'sort=title']) {
        expectProblem(await call(gateway(), 'GET', `/api/brain/documents?${params}`, { token: tenant.token }), 400, 'validation_failed');
      }
    });

    it('answers 400 for an empty, missing or over-long query, a k out of range and unknown parameters', async () => {
      for (const params of ['', 'q=', 'q=%20%20', 'k=3', 'q=x&k=0', 'q=x&k=51', 'q=x&k=many', 'q=x&top=3', 'q=a&q=b', `q=${'x'.repeat(10_001)}`]) {
        const response = await query(owner, params);
        expectProblem(response, 400, 'validation_failed');
      }
    });

    it('answers hostile queries with a ranking, never a server error', async () => {
      const hostile = [
        "'; DROP TABLE brain.postings; --",
        'ferrite OR 1=1 AND NOT (x) | & ! * ? ~ ^ " \\',
        '%00%27%22%25',
        '🧪 东京 مرحبا \u202e',
        'the of and a an',
        'x'.repeat(10_000),
        Array.from({ length: 1_500 }, (_, n) => `w${n}`).join(' '),
      ];
      for (const q of hostile) {
        const response = await query(owner, `q=${encodeURIComponent(q)}&k=50`);
        expect({ q: q.slice(0, 40), status: response.status }).toEqual({ q: q.slice(0, 40), status: 200 });
        expect(Array.isArray(response.body.results)).toBe(true);
      }
    });

    it('takes documents above the 1 MiB body limit up to 10 MiB of content, and answers 413 beyond', async () => {
      const paragraph = 'Klystrons amplify microwave signals by velocity modulation of an electron beam. ';
      const twoMib = await ingest(owner, { title: 'Two mebibytes', content: paragraph.repeat(Math.ceil((2 * MIB) / paragraph.length)) });
      expect(twoMib.status).toBe(201);
      expect(twoMib.body.chunkCount).toBeGreaterThan(1_000);

      const overContent = await ingest(owner, { title: 'Too big', content: 'a'.repeat(10 * MIB + 1) });
      expectProblem(overContent, 413, 'payload_too_large');
      expectProblem(await postDeclaringLength(gateway(), '/api/brain/documents', owner.token, 11 * MIB + 1), 413, 'payload_too_large');
      expectProblem(await postDeclaringLength(gateway(), '/api/missions', owner.token, MIB + 1), 413, 'payload_too_large');
    }, 120_000);

    it('lets a client that uploads a body over the limit in full read its 413, never a reset connection', async () => {
      // Refused by its declared length before it is read: the server must take the rest of it
      // rather than close the connection under the client's upload.
      const body = JSON.stringify({ title: 'Too big to read', content: 'z'.repeat(11 * MIB + 1) });
      const overMissionLimit = JSON.stringify({ title: 'x', objective: 'y'.repeat(MIB + 1) });
      const failures: string[] = [];
      for (let attempt = 0; attempt < 30; attempt++) {
        for (const [path, payload] of [
          ['/api/brain/documents', body],
          ['/api/missions', overMissionLimit],
        ] as const) {
          try {
            const response = await fetch(`${gateway()}${path}`, {
              method: 'POST',
              headers: { authorization: `Bearer ${owner.token}`, 'content-type': 'application/json' },
              body: payload,
            });
            const problem = (await response.json()) as { code?: string };
            if (response.status !== 413 || problem.code !== 'payload_too_large') failures.push(`${path}: ${response.status} ${problem.code}`);
          } catch (error) {
            failures.push(`${path}: ${String((error as { cause?: unknown }).cause ?? error)}`);
          }
        }
      }
      expect(failures).toEqual([]);
    }, 120_000);

    it('validates documents: missing title, empty content, unknown fields', async () => {
      const response = await ingest(owner, { content: '  ', colour: 'red' });
      expectProblem(response, 400, 'validation_failed');
      expect(response.body.errors.map((e: { field: string }) => e.field).sort()).toEqual(['colour', 'content', 'title']);
      expectProblem(await call(gateway(), 'POST', '/api/brain/documents', { token: owner.token, rawBody: '{"title":' }), 400, 'malformed_json');
    });

    it('needs brain:write to ingest or delete and brain:read to read', async () => {
      const readOnly = await clientCredentialsToken(context.deployment.issuer, owner.clientId, owner.clientSecret, 'brain:read');
      const denied = await call(gateway(), 'POST', '/api/brain/documents', { token: readOnly.access_token, body: { title: 'T', content: 'C' } });
      expectProblem(denied, 403, 'insufficient_scope');
      expect(denied.headers.get('www-authenticate')).toContain('scope="brain:write"');
      expectProblem(await call(gateway(), 'DELETE', `/api/brain/documents/${randomUUID()}`, { token: readOnly.access_token }), 403, 'insufficient_scope');
      expect((await call(gateway(), 'GET', '/api/brain/query?q=x', { token: readOnly.access_token })).status).toBe(200);
      const missionsOnly = await clientCredentialsToken(context.deployment.issuer, owner.clientId, owner.clientSecret, 'missions:read');
      const noRead = await call(gateway(), 'GET', '/api/brain/query?q=x', { token: missionsOnly.access_token });
      expectProblem(noRead, 403, 'insufficient_scope');
      expect(noRead.headers.get('www-authenticate')).toContain('scope="brain:read"');
    });

    it('indexes a large document (analysed off the service thread) passage by passage, its title with every passage', async () => {
      const word = `maser${randomUUID().slice(0, 8)}`;
      const titleWord = `gyrotron${randomUUID().slice(0, 8)}`;
      const paragraphs = Array.from({ length: 40 }, (_, n) =>
        `Stage ${n} of the transmitter ${n === 23 ? `holds the ${word} oscillator` : 'carries the drive signal'} through a waveguide run. `.repeat(9).trim(),
      );
      const content = paragraphs.join('\n\n');
      expect(content.length).toBeGreaterThan(16_384);
      const created = await ingest(owner, { title: `The ${titleWord} bench`, content });
      expect(created.status).toBe(201);
      const { id, chunkCount } = created.body as { id: string; chunkCount: number };
      expect(chunkCount).toBeGreaterThan(10);

      const found = await query(owner, `q=${word}&k=5`);
      expect(found.status).toBe(200);
      expect(found.body.results.length).toBeGreaterThan(0);
      for (const result of found.body.results) {
        expect(result.documentId).toBe(id);
        expect(result.text).toContain(word);
      }
      const byTitle = await query(owner, `q=${titleWord}&k=50`);
      expect(byTitle.body.results).toHaveLength(chunkCount);
      expect(new Set(byTitle.body.results.map((result: { chunkId: string }) => result.chunkId)).size).toBe(chunkCount);
    });

    it('reads a document’s passages in order, a page at a time, as brain:read, to its tenant only', async () => {
      const paragraphs = Array.from({ length: 10 }, (_, n) => `Section ${n}: the attenuator of stage ${n} is trimmed by hand. `.repeat(10).trim());
      const created = await ingest(owner, { title: 'Assembly notes', content: paragraphs.join('\n\n') });
      expect(created.status).toBe(201);
      const { id, chunkCount } = created.body as { id: string; chunkCount: number };
      expect(chunkCount).toBeGreaterThan(2);
      const readOnly = await clientCredentialsToken(context.deployment.issuer, owner.clientId, owner.clientSecret, 'brain:read');

      const passages: Array<{ chunkId: string; ordinal: number; text: string }> = [];
      let cursor: string | null = null;
      do {
        const page: ApiResponse<{ items: typeof passages; nextCursor: string | null }> = await call(
          gateway(),
          'GET',
          `/api/brain/documents/${id}/passages?limit=2${cursor ? `&cursor=${cursor}` : ''}`,
          {
            token: readOnly.access_token,
          },
        );
        expect(page.status).toBe(200);
        passages.push(...page.body.items);
        cursor = page.body.nextCursor;
      } while (cursor);
      expect(passages.map((passage) => passage.ordinal)).toEqual(Array.from({ length: chunkCount }, (_, n) => n));
      const text = passages.map((passage) => passage.text).join('\n\n');
      expect(paragraphs.every((paragraph) => text.includes(paragraph))).toBe(true);
      // A passage a query finds is one of these, under the same id.
      const found = await query(owner, 'q=attenuator%20stage&k=50');
      const ours = found.body.results.filter((result: { documentId: string }) => result.documentId === id);
      expect(ours.length).toBeGreaterThan(0);
      for (const result of ours) expect(passages.find((passage) => passage.chunkId === result.chunkId)?.text).toBe(result.text);

      expectProblem(await call(gateway(), 'GET', `/api/brain/documents/${id}/passages`, { token: stranger.token }), 404, 'not_found');
      expectProblem(await call(gateway(), 'GET', `/api/brain/documents/${id}/passages?cursor=nonsense`, { token: owner.token }), 400, 'validation_failed');
      expectProblem(await call(gateway(), 'GET', `/api/brain/documents/${id}/passages?limit=101`, { token: owner.token }), 400, 'validation_failed');
      const missionsOnly = await clientCredentialsToken(context.deployment.issuer, owner.clientId, owner.clientSecret, 'missions:read');
      expectProblem(await call(gateway(), 'GET', `/api/brain/documents/${id}/passages`, { token: missionsOnly.access_token }), 403, 'insufficient_scope');
    });

    it('hides a tenant’s documents and passages from every other tenant', async () => {
      const secretWord = `quasar${randomUUID().slice(0, 8)}`;
      const { body } = await ingest(owner, { title: 'Private', content: `Only the owner may read about ${secretWord}.` });
      expect((await query(owner, `q=${secretWord}`)).body.results).toHaveLength(1);

      const fromStranger = await call(gateway(), 'GET', `/api/brain/documents/${body.id}`, { token: stranger.token });
      const missing = await call(gateway(), 'GET', `/api/brain/documents/${randomUUID()}`, { token: stranger.token });
      const malformed = await call(gateway(), 'GET', `/api/brain/documents/not-a-uuid'%20OR%201=1`, { token: stranger.token });
      for (const response of [fromStranger, missing, malformed]) expectProblem(response, 404, 'not_found');
      expect(fromStranger.body.detail).toBe(missing.body.detail);
      expectProblem(await call(gateway(), 'DELETE', `/api/brain/documents/${body.id}`, { token: stranger.token }), 404, 'not_found');

      expect((await query(stranger, `q=${secretWord}&k=50`)).body.results).toEqual([]);
      const strangerList = await call(gateway(), 'GET', '/api/brain/documents?limit=100', { token: stranger.token });
      expect(strangerList.body.items.map((item: { id: string }) => item.id)).not.toContain(body.id);
      // Still there for its owner.
      expect((await call(gateway(), 'GET', `/api/brain/documents/${body.id}`, { token: owner.token })).status).toBe(200);
    });

    it('gives a mission’s brain.query step the passages of its own tenant', async () => {
      const word = `magnetron${randomUUID().slice(0, 8)}`;
      const { body: document } = await ingest(owner, { title: 'Radar sources', content: `A cavity ${word} generates the pulses of early radar sets.` });
      await ingest(stranger, { title: 'Decoy', content: `The stranger also writes about the ${word}.` });
      const submitted = await call(gateway(), 'POST', '/api/missions', {
        token: owner.token,
        body: { title: 'Radar history', objective: `What generates radar pulses? ${word}`, steps: [{ type: 'brain.query', k: 3 }] },
      });
      expect(submitted.status).toBe(202);
      const done = await waitForMission(gateway(), owner.token, submitted.body.id);
      expect(done.status).toBe('succeeded');
      const results = done.steps[0].output.results;
      expect(results.map((r: { documentId: string }) => r.documentId)).toEqual([document.id]);
      expect(results[0].text).toContain(word);
      expect(done.result.steps[0].results[0].documentId).toBe(document.id);
    });

    describe('storage quotas', () => {
      const usageOf = async (tenant: Tenant) => {
        const response = await call(gateway(), 'GET', `/admin/tenants/${tenant.id}/usage`, { token: context.adminToken });
        expect(response.status).toBe(200);
        return response.body as { tenantId: string; documents: { used: number; limit: number }; bytes: { used: number; limit: number } };
      };

      it('shows each tier’s quota, takes an enterprise tenant’s own, and refuses one for another tier', async () => {
        const starter = await call(gateway(), 'POST', '/admin/tenants', { token: context.adminToken, body: { name: 'Quota starter', tier: 'starter' } });
        expect(starter.body.storage).toEqual({ documents: 1_000, bytes: 100 * MIB });
        const custom = await call(gateway(), 'POST', '/admin/tenants', {
          token: context.adminToken,
          body: { name: 'Quota enterprise', tier: 'enterprise', rpm: 10_000, storage: { documents: 7 } },
        });
        expect(custom.status).toBe(201);
        expect(custom.body.storage).toEqual({ documents: 7, bytes: 100 * 1024 * MIB });
        expectProblem(
          await call(gateway(), 'POST', '/admin/tenants', { token: context.adminToken, body: { name: 'No', tier: 'business', storage: { documents: 5 } } }),
          400,
          'validation_failed',
        );
        expectProblem(
          await call(gateway(), 'PATCH', `/admin/tenants/${starter.body.id}`, { token: context.adminToken, body: { storage: { bytes: 5 } } }),
          400,
          'validation_failed',
        );
        expectProblem(
          await call(gateway(), 'PATCH', `/admin/tenants/${custom.body.id}`, { token: context.adminToken, body: { storage: { documents: -1 } } }),
          400,
          'validation_failed',
        );
        // Another tier drops the enterprise tenant's own quota for the tier's.
        const down = await call(gateway(), 'PATCH', `/admin/tenants/${custom.body.id}`, { token: context.adminToken, body: { tier: 'business' } });
        expect(down.body.storage).toEqual({ documents: 10_000, bytes: 1024 * MIB });
        expectProblem(await call(gateway(), 'GET', `/admin/tenants/${randomUUID()}/usage`, { token: context.adminToken }), 404, 'not_found');
        expectProblem(await call(gateway(), 'GET', `/admin/tenants/${starter.body.id}/usage`, { token: owner.token }), 403, 'insufficient_scope');
      });

      it('refuses a document past the tenant’s documents or bytes with 403 quota_exceeded, on REST and MCP, and counts what deletion frees', async () => {
        const tenant = await enterpriseTenant('Quota holder');
        const patched = await call(gateway(), 'PATCH', `/admin/tenants/${tenant.id}`, { token: context.adminToken, body: { storage: { documents: 2, bytes: 1_000 } } });
        expect(patched.body.storage).toEqual({ documents: 2, bytes: 1_000 });
        // The gateway reads a changed quota within 5 s.
        await new Promise((resolve) => setTimeout(resolve, 5_500));
        const first = await ingest(tenant, { title: 'One', content: 'a'.repeat(300) });
        expect(first.status).toBe(201);
        expectProblem(await ingest(tenant, { title: 'Too many bytes', content: 'b'.repeat(701) }), 403, 'quota_exceeded');
        const second = await ingest(tenant, { title: 'Two', content: 'c'.repeat(700) });
        expect(second.status).toBe(201);
        const refused = await ingest(tenant, { title: 'Three', content: 'd' });
        expectProblem(refused, 403, 'quota_exceeded');
        expect(refused.body.detail).toContain('2 documents');
        expect(await usageOf(tenant)).toEqual({ tenantId: tenant.id, documents: { used: 2, limit: 2 }, bytes: { used: 1_000, limit: 1_000 } });
        // Refused documents left nothing behind: not listed, not found.
        const listed = await call(gateway(), 'GET', '/api/brain/documents', { token: tenant.token });
        expect(listed.body.items.map((item: { title: string }) => item.title).sort()).toEqual(['One', 'Two']);
        expect((await query(tenant, 'q=d&k=5')).body.results).toEqual([]);
        // The same quota through MCP.
        const mcp = await fetch(`${gateway()}/mcp`, {
          method: 'POST',
          headers: { authorization: `Bearer ${tenant.token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
          body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'ingest_document', arguments: { title: 'Via MCP', content: 'e' } } }),
        });
        const text = await mcp.text();
        expect(text).toContain('quota_exceeded');
        expect(text).toContain('"isError":true');
        // Deleting frees its place and its bytes.
        expect((await call(gateway(), 'DELETE', `/api/brain/documents/${first.body.id}`, { token: tenant.token })).status).toBe(204);
        expect(await usageOf(tenant)).toEqual({ tenantId: tenant.id, documents: { used: 1, limit: 2 }, bytes: { used: 700, limit: 1_000 } });
        expect((await ingest(tenant, { title: 'Three again', content: 'f'.repeat(300) })).status).toBe(201);
      }, 60_000);

      it('lets concurrent ingestions at the edge of the quota through only as far as it allows', async () => {
        const tenant = await enterpriseTenant('Quota race');
        await call(gateway(), 'PATCH', `/admin/tenants/${tenant.id}`, { token: context.adminToken, body: { storage: { documents: 3 } } });
        await new Promise((resolve) => setTimeout(resolve, 5_500));
        const answers = await Promise.all(Array.from({ length: 8 }, (_, n) => ingest(tenant, { title: `Racer ${n}`, content: `Passage number ${n} about dielectrics.` })));
        expect(answers.map((answer) => answer.status).sort()).toEqual([201, 201, 201, 403, 403, 403, 403, 403]);
        expect((await usageOf(tenant)).documents).toEqual({ used: 3, limit: 3 });
      }, 60_000);
    });
  });
}
