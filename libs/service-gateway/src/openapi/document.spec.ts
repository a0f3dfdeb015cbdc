import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { type OperationDefinition, Operations, Scopes, SubmitMissionSchema, TENANT_SCOPES } from '@mission/contracts';
import { MCP_TOOLS } from '../mcp/mcp-tools';
import { scopesNeeded } from '../mcp/mcp.controller';
import { renderOpenApiDocument } from './render';

const ROOT = path.join(__dirname, '..', '..', '..', '..');

type Operation = {
  operationId: string;
  security: Array<Record<string, string[]>>;
  responses: Record<string, { content?: Record<string, unknown>; headers?: Record<string, unknown> }>;
  requestBody?: { content: Record<string, { schema: unknown }> };
};

describe('OpenAPI document', () => {
  let text: string;
  let document: { paths: Record<string, Record<string, Operation>>; components: { schemas: Record<string, unknown> } };
  const operations = (): Array<[string, string, Operation]> =>
    Object.entries(document.paths).flatMap(([path, methods]) => Object.entries(methods).map(([method, operation]) => [path, method, operation] as [string, string, Operation]));

  beforeAll(async () => {
    text = await renderOpenApiDocument();
    document = JSON.parse(text);
  }, 60_000);

  it('passes Redocly’s recommended rules (tools/openapi/lint.mjs)', () => {
    const directory = mkdtempSync(path.join(os.tmpdir(), 'openapi-'));
    try {
      const file = path.join(directory, 'openapi.json');
      writeFileSync(file, text);
      const lint = (): string => execFileSync(process.execPath, [path.join(ROOT, 'tools', 'openapi', 'lint.mjs'), file], { encoding: 'utf8' });
      expect(lint()).toMatch(/^0 problem\(s\)/m);
      // The linter does fail: a document that breaks a rule is refused.
      writeFileSync(file, text.replace('"operationId": "submitMission"', '"operationId": "getMission"'));
      const refused = (() => {
        try {
          lint();
          return undefined;
        } catch (error) {
          return error as { status: number; stdout: string };
        }
      })();
      expect(refused?.status).toBe(1);
      expect(refused?.stdout).toContain('operation-operationId-unique');
    } finally {
      rmSync(directory, { recursive: true, force: true });
    }
  });

  it('routes and documents every operation of the catalogue with its own access, and gives each MCP tool the scopes of its REST twin', () => {
    const documented = new Map(operations().map(([path, method, operation]) => [operation.operationId, { route: `${method.toUpperCase()} ${path}`, operation }]));
    const securityOf = (access: OperationDefinition['access']): Array<Record<string, string[]>> =>
      access === 'public' ? [] : [{ oauth2: access === 'operator' ? [Scopes.platformAdmin] : [...access.scopes] }];
    for (const operation of Object.values(Operations) as OperationDefinition[]) {
      const entry = documented.get(operation.http.operationId);
      expect(entry?.route).toBe(`${operation.http.method} ${operation.http.path.replace(':id', '{id}')}`);
      expect(entry?.operation.security).toEqual(securityOf(operation.access));
    }
    // What the MCP endpoint demands for a call of each tool (scopesNeeded) against what its REST twin's route demands.
    expect(MCP_TOOLS.length).toBeGreaterThan(0);
    for (const tool of MCP_TOOLS) {
      const twin = documented.get(Operations[tool.operation].http.operationId);
      const enforced = scopesNeeded({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: tool.name, arguments: {} } });
      expect({ tool: tool.name, scopes: twin?.operation.security }).toEqual({ tool: tool.name, scopes: [{ oauth2: enforced }] });
    }
  });

  it('documents every endpoint of the contract, each with a unique operation id', () => {
    const routes = operations().map(([path, method]) => `${method.toUpperCase()} ${path}`);
    expect(routes.sort()).toEqual(
      [
        'POST /api/missions',
        'GET /api/missions',
        'GET /api/missions/{id}',
        'GET /api/missions/{id}/wait',
        'POST /api/missions/{id}/cancel',
        'POST /api/brain/documents',
        'POST /api/brain/query',
        'GET /api/brain/documents',
        'GET /api/brain/documents/{id}',
        'GET /api/brain/documents/{id}/passages',
        'DELETE /api/brain/documents/{id}',
        'GET /api/brain/query',
        'GET /api/events',
        'GET /api/hit',
        'GET /api/hit/{id}',
        'POST /api/hit/{id}/approve',
        'POST /api/hit/{id}/reject',
        'POST /api/webhooks',
        'GET /api/webhooks',
        'GET /api/webhooks/{id}',
        'DELETE /api/webhooks/{id}',
        'GET /api/webhooks/{id}/deliveries',
        'POST /api/webhooks/{id}/test',
        'POST /mcp',
        'POST /admin/tenants',
        'GET /admin/tenants/{id}',
        'GET /admin/tenants/{id}/usage',
        'PATCH /admin/tenants/{id}',
        'POST /admin/tenants/{id}/clients',
        'POST /admin/tenants/{id}/users',
        'POST /admin/keys/rotate',
        'GET /.well-known/oauth-protected-resource',
        'GET /health/live',
        'GET /health/ready',
      ].sort(),
    );
    const ids = operations().map(([, , operation]) => operation.operationId);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('gives every tenant operation its scope, the RateLimit headers and the 401, 403, 429 and 503 problems', () => {
    const tenant = operations().filter(([path]) => path.startsWith('/api') || path === '/mcp');
    expect(tenant.length).toBe(24);
    for (const [path, method, operation] of tenant) {
      const where = `${method.toUpperCase()} ${path}`;
      expect({ where, scopes: operation.security[0]?.oauth2?.every((scope) => (TENANT_SCOPES as readonly string[]).includes(scope)) }).toEqual({ where, scopes: true });
      for (const status of ['401', '403', '429', '503']) {
        expect({ where, status, content: Object.keys(operation.responses[status]?.content ?? {}) }).toEqual({ where, status, content: ['application/problem+json'] });
      }
      const success = Object.entries(operation.responses).find(([status]) => status.startsWith('2'))?.[1];
      expect({ where, headers: Object.keys(success?.headers ?? {}).sort() }).toEqual({ where, headers: expect.arrayContaining(['RateLimit', 'RateLimit-Policy', 'X-Request-Id']) });
    }
    const submit = document.paths['/api/missions'].post;
    expect(submit.security).toEqual([{ oauth2: ['missions:write'] }]);
    expect(Object.keys(submit.responses).sort()).toEqual(['202', '400', '401', '403', '409', '413', '415', '422', '429', '503']);
    expect(document.paths['/health/live'].get.security).toEqual([]);
    expect(document.paths['/admin/tenants'].post.security).toEqual([{ oauth2: ['platform:admin'] }]);
  });

  it('describes request bodies with the very contracts that validate them', () => {
    const { $schema: _dialect, ...contract } = z.toJSONSchema(SubmitMissionSchema, { io: 'input' }) as Record<string, unknown>;
    expect(document.components.schemas.SubmitMission).toEqual(contract);
    expect(document.paths['/api/missions'].post.requestBody?.content['application/json'].schema).toEqual({ $ref: '#/components/schemas/SubmitMission' });
  });

  it('is committed in libs/api-client as rendered, with the generated types up to date (`npm run openapi:generate`)', () => {
    expect(readFileSync(path.join(ROOT, 'libs', 'api-client', 'openapi.json'), 'utf8')).toBe(text);
    // openapi-typescript is ESM: the types are compared by the generator itself, in its own process.
    const check = execFileSync(process.execPath, ['-r', './tools/register.cjs', 'tools/openapi/generate.ts', '--check'], { cwd: ROOT, encoding: 'utf8' });
    expect(check).toContain('up to date');
  }, 60_000);
});
