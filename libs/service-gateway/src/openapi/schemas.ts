import { z } from 'zod';
import { QUERY_SCHEMAS, type QueryName, REQUEST_SCHEMAS, RESPONSE_SCHEMAS, type SchemaName } from '@mission/contracts';

/*
 * The OpenAPI document's schemas: the contracts that validate request bodies and query parameters,
 * and those of the response bodies (libs/contracts), converted with zod's JSON Schema generator.
 */

/** A contract as an OpenAPI 3.1 (JSON Schema 2020-12) schema object. */
export function openApiSchema(schema: z.ZodType, io: 'input' | 'output'): Record<string, unknown> {
  const { $schema: _dialect, ...json } = z.toJSONSchema(schema, { io, unrepresentable: 'any' }) as Record<string, unknown>;
  return json;
}

/** `components.schemas` of the document. */
export function componentSchemas(): Record<SchemaName, Record<string, unknown>> {
  const out = {} as Record<SchemaName, Record<string, unknown>>;
  for (const [name, schema] of Object.entries(RESPONSE_SCHEMAS)) out[name as SchemaName] = openApiSchema(schema, 'output');
  for (const [name, schema] of Object.entries(REQUEST_SCHEMAS)) out[name as SchemaName] = openApiSchema(schema, 'input');
  return out;
}

/** The query parameters a contract accepts, as OpenAPI parameter objects. */
export function queryParameters(contract: QueryName): Array<Record<string, unknown>> {
  const json = openApiSchema(QUERY_SCHEMAS[contract], 'input') as { properties: Record<string, Record<string, unknown>>; required?: string[] };
  return Object.entries(json.properties).map(([name, schema]) => ({
    name,
    in: 'query',
    required: json.required?.includes(name) ?? false,
    schema,
    description: QUERY_DESCRIPTIONS[name] ?? '',
  }));
}

const QUERY_DESCRIPTIONS: Readonly<Record<string, string>> = {
  limit: 'page size, 1–100 (default 20)',
  cursor: 'the `nextCursor` of the previous page',
  status: 'only missions with this status',
  q: 'free-text query',
  k: 'how many passages, 1–50 (default 5)',
  types: 'only these event types, separated by commas (default: every type the token may read)',
  missionId: "only this mission's events",
};
