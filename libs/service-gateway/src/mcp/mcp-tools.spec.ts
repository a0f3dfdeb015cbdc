import { z } from 'zod';
import { IngestDocumentSchema, RESPONSE_SCHEMAS, Scopes, TENANT_SCOPES } from '@mission/contracts';
import { advertisedOutputSchema, advertisedSchema, MCP_TOOLS } from './mcp-tools';
import { scopesNeeded } from './mcp.controller';

describe('MCP tools', () => {
  it('names the nine tools the contract fixes, each with a tenant scope and a description for an agent', () => {
    expect(MCP_TOOLS.map((tool) => tool.name)).toEqual([
      'submit_mission',
      'list_missions',
      'get_mission',
      'wait_for_mission',
      'ingest_document',
      'query_brain',
      'list_pending_hits',
      'approve_hit',
      'reject_hit',
    ]);
    for (const tool of MCP_TOOLS) {
      expect(tool.scopes).toHaveLength(1);
      for (const scope of tool.scopes) expect(TENANT_SCOPES).toContain(scope);
      expect(tool.description.length).toBeGreaterThan(80);
    }
  });

  it('describes each result with the REST response body schema the OpenAPI document uses', () => {
    const outputs = Object.fromEntries(MCP_TOOLS.map((tool) => [tool.name, Object.entries(RESPONSE_SCHEMAS).find(([, schema]) => schema === tool.output)?.[0]]));
    expect(outputs).toEqual({
      submit_mission: 'Mission',
      get_mission: 'Mission',
      wait_for_mission: 'Mission',
      list_missions: 'MissionPage',
      query_brain: 'BrainQueryResult',
      ingest_document: 'IngestedDocument',
      list_pending_hits: 'HitItemPage',
      approve_hit: 'HitItem',
      reject_hit: 'HitItem',
    });
    for (const tool of MCP_TOOLS) expect(advertisedOutputSchema(tool.output)['~standard'].jsonSchema.output({ target: 'draft-2020-12' })).toMatchObject({ type: 'object' });
  });

  it('advertises results open to fields a newer service adds, the rest of the schema unchanged', () => {
    const strict = z.toJSONSchema(RESPONSE_SCHEMAS.MissionPage, { io: 'output' }) as Record<string, unknown>;
    const advertised = advertisedOutputSchema(RESPONSE_SCHEMAS.MissionPage)['~standard'].jsonSchema.output({ target: 'draft-2020-12' });
    expect(JSON.stringify(strict)).toContain('"additionalProperties":false');
    expect(JSON.stringify(advertised)).not.toContain('"additionalProperties":false');
    expect(JSON.stringify(advertised)).toBe(JSON.stringify(strict).replaceAll(',"additionalProperties":false', '').replaceAll('"additionalProperties":false,', ''));
    // Maps keep their value schema (only `false` is dropped).
    expect(advertised).toMatchObject({ properties: { items: { items: { properties: { metadata: { additionalProperties: { type: 'string' } } } } } } });
  });

  it('advertises the JSON Schema generated from the REST contract and leaves validation to the operation', async () => {
    const advertised = advertisedSchema(IngestDocumentSchema)['~standard'];
    const { $schema: _ignored, ...contract } = z.toJSONSchema(IngestDocumentSchema, { io: 'input' }) as Record<string, unknown>;
    expect(advertised.jsonSchema.input({ target: 'draft-2020-12' })).toMatchObject(contract);
    expect(contract).toMatchObject({ required: ['title', 'content'], additionalProperties: false });
    // Invalid input passes through untouched, to fail in the operation with REST's problem details.
    expect(await advertised.validate({ title: 7 })).toEqual({ value: { title: 7 } });
  });
});

describe('scopesNeeded', () => {
  it('asks for the scope of the tool being called', () => {
    expect(scopesNeeded({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'approve_hit', arguments: {} } })).toEqual([Scopes.hitsApprove]);
    expect(scopesNeeded({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'submit_mission' } })).toEqual([Scopes.missionsWrite]);
  });

  it('asks for nothing to list tools, for unknown tools (the SDK answers those) or for malformed messages', () => {
    expect(scopesNeeded({ jsonrpc: '2.0', id: 1, method: 'tools/list' })).toEqual([]);
    expect(scopesNeeded({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'drop_tables' } })).toEqual([]);
    expect(scopesNeeded(null)).toEqual([]);
    expect(scopesNeeded('tools/call')).toEqual([]);
    expect(scopesNeeded({ method: 'tools/call', params: { name: 42 } })).toEqual([]);
  });

  it('needs nothing for an array: batches are refused before scopes are looked at', () => {
    expect(scopesNeeded([{ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'query_brain' } }])).toEqual([]);
  });
});
