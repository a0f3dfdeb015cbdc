import { readFileSync } from 'node:fs';
import path from 'node:path';
import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { createApiClient } from '@mission/api-client';
import { call, eventually, politeFetch } from '../api-client';
import type { ScenarioContext } from '../gateway-scenarios';

const COMMITTED = JSON.parse(readFileSync(path.join(__dirname, '..', '..', '..', 'libs', 'api-client', 'openapi.json'), 'utf8'));

/** The served OpenAPI document, and the client generated from it, against the running server. */
export function describeOpenApiScenarios(context: ScenarioContext): void {
  const gateway = (): string => context.deployment.gatewayUrl;

  /** Validates bodies against the served document's component schemas. */
  function validatorOf(document: { components: { schemas: Record<string, unknown> } }) {
    const ajv = new Ajv2020({ strict: false, allErrors: true });
    addFormats(ajv);
    ajv.addSchema({ $id: 'openapi.json', components: document.components });
    return (schema: string, body: unknown): void => {
      const validate = ajv.getSchema(`openapi.json#/components/schemas/${schema}`);
      if (!validate) throw new Error(`No schema ${schema}`);
      if (!validate(body)) throw new Error(`${schema} does not describe ${JSON.stringify(body)}: ${ajv.errorsText(validate.errors)}`);
    };
  }

  describe('OpenAPI', () => {
    it('serves the committed document at /api/openapi.json (its own URLs aside) and Swagger UI at /api/docs', async () => {
      const served = await call(gateway(), 'GET', '/api/openapi.json');
      expect(served.status).toBe(200);
      expect(served.body.openapi).toBe('3.1.0');
      expect(served.body.servers).toEqual([{ url: gateway() }]);
      expect(served.body.paths).toEqual(COMMITTED.paths);
      expect(served.body.components.schemas).toEqual(COMMITTED.components.schemas);
      expect(served.body.components.securitySchemes.oauth2.flows.clientCredentials.tokenUrl).toBe(`${context.deployment.issuer}/token`);
      const ui = await fetch(`${gateway()}/api/docs`);
      expect(ui.status).toBe(200);
      expect(ui.headers.get('content-type')).toContain('text/html');
    });

    it('runs a mission through an approval with the generated client, every answer matching its documented schema', async () => {
      const document = (await call(gateway(), 'GET', '/api/openapi.json')).body;
      const matches = validatorOf(document);
      // It polls the mission: politely, after each 429's Retry-After.
      const api = createApiClient({ baseUrl: gateway(), token: context.tenantA.token, fetch: politeFetch() });

      const submitted = await api.POST('/api/missions', {
        body: {
          title: 'Typed client',
          objective: 'Stay in step with the document',
          steps: [
            { type: 'brain.query', k: 2 },
            { type: 'approval', title: 'Typed?' },
          ],
        },
        params: { header: { 'Idempotency-Key': `typed-${Date.now()}` } },
      });
      expect(submitted.response.status).toBe(202);
      if (!submitted.data) throw new Error('no mission');
      matches('Mission', submitted.data);
      expect(submitted.response.headers.get('location')).toBe(`/api/missions/${submitted.data.id}`);
      const id = submitted.data.id;

      const waiting = await eventually(async () => {
        const { data } = await api.GET('/api/missions/{id}', { params: { path: { id } } });
        return data?.status === 'awaiting_approval' ? data : undefined;
      }, 'the mission to await approval');
      matches('Mission', waiting);
      const hitId = waiting.steps[1]?.hitId ?? '';

      const pending = await api.GET('/api/hit', { params: { query: { limit: 100 } } });
      matches('HitItemPage', pending.data);
      expect(pending.data?.items.map((item) => item.id)).toContain(hitId);

      const approved = await api.POST('/api/hit/{id}/approve', { params: { path: { id: hitId } }, body: { comment: 'typed' } });
      expect(approved.data?.status).toBe('approved');
      matches('HitItem', approved.data);

      const final = await eventually(async () => {
        const { data } = await api.GET('/api/missions/{id}', { params: { path: { id } } });
        return data?.status === 'succeeded' ? data : undefined;
      }, 'the mission to succeed');
      matches('Mission', final);
      const listed = await api.GET('/api/missions', { params: { query: { status: 'succeeded', limit: 5 } } });
      matches('MissionPage', listed.data);

      const query = await api.GET('/api/brain/query', { params: { query: { q: 'anything at all', k: 3 } } });
      matches('BrainQueryResult', query.data);
    });

    it('documents the failures the server sends: problem details, typed as such', async () => {
      const document = (await call(gateway(), 'GET', '/api/openapi.json')).body;
      const matches = validatorOf(document);
      // It polls the mission: politely, after each 429's Retry-After.
      const api = createApiClient({ baseUrl: gateway(), token: context.tenantA.token, fetch: politeFetch() });

      const missing = await api.GET('/api/missions/{id}', { params: { path: { id: '00000000-0000-4000-8000-000000000000' } } });
      expect(missing.response.status).toBe(404);
      expect(missing.error?.code).toBe('not_found');
      matches('Problem', missing.error);
      expect(Object.keys(document.paths['/api/missions/{id}'].get.responses)).toContain(String(missing.response.status));

      const invalid = await api.POST('/api/missions', { body: { title: '', objective: 'x' } });
      expect(invalid.response.status).toBe(400);
      matches('Problem', invalid.error);
      expect(invalid.error?.errors?.[0]?.field).toBe('title');

      const anonymous = createApiClient({ baseUrl: gateway(), token: 'not-a-token' });
      const refused = await anonymous.GET('/api/hit', {});
      expect(refused.response.status).toBe(401);
      matches('Problem', refused.error);
    });
  });
}
