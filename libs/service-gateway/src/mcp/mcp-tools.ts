import type { StandardSchemaWithJSON, ToolAnnotations } from '@modelcontextprotocol/server';
import type { z } from 'zod';
import { type McpBinding, type OperationDefinition, type OperationName, Operations, operationInputSchema, type Scope } from '@mission/contracts';

/** An MCP tool: one of the catalogue's operations, under the name and description its MCP binding gives it. */
export interface McpTool extends McpBinding {
  readonly operation: OperationName;
  /** The scopes of the REST twin (the operation's); a token without them gets 403 insufficient_scope. */
  readonly scopes: readonly Scope[];
  /** The operation's input: the route's `id` and its query or body fields, in one object. */
  readonly input: z.ZodType;
  /** Whether the operation's route has an `:id`, which the tool takes as its `id` argument. */
  readonly takesId: boolean;
  /** The reply's schema (the REST response body's), advertised as the tool's outputSchema. */
  readonly output: z.ZodType;
  readonly annotations: ToolAnnotations;
}

function toolOf(name: OperationName, operation: OperationDefinition, mcp: McpBinding): McpTool {
  if (typeof operation.access !== 'object') throw new Error(`${name} is an MCP tool but not a tenant operation`);
  return {
    ...mcp,
    operation: name,
    scopes: operation.access.scopes,
    input: operationInputSchema(operation),
    takesId: operation.http.pathId !== undefined,
    output: operation.message.reply,
  };
}

/** Every operation an agent can run: those of the catalogue with an MCP binding, named as the contract fixes them (README, "MCP for AI agents"). */
export const MCP_TOOLS: readonly McpTool[] = (Object.entries(Operations) as Array<[OperationName, OperationDefinition]>).flatMap(([name, operation]) =>
  operation.mcp ? [toolOf(name, operation, operation.mcp)] : [],
);

export const MCP_TOOL_SCOPES: ReadonlyMap<string, readonly Scope[]> = new Map(MCP_TOOLS.map((tool) => [tool.name, tool.scopes]));

/**
 * A contract's JSON Schema for `tools/list`, with validation left to the operation itself: it
 * runs the same parse as REST and fails as a tool result carrying the same problem details,
 * instead of the SDK's own message.
 */
export function advertisedSchema(schema: z.ZodType): StandardSchemaWithJSON<Record<string, unknown>, Record<string, unknown>> {
  const standard = schema['~standard'] as unknown as StandardSchemaWithJSON['~standard'];
  return {
    '~standard': {
      version: 1,
      vendor: 'mission-service',
      validate: (value: unknown) => ({ value: (typeof value === 'object' && value !== null ? value : {}) as Record<string, unknown> }),
      jsonSchema: standard.jsonSchema,
    },
  };
}

/** Every object schema in `schema` with `additionalProperties: false` dropped (a copy). */
function openObjects(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(openObjects);
  if (typeof schema !== 'object' || schema === null) return schema;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(schema)) if (!(key === 'additionalProperties' && value === false)) out[key] = openObjects(value);
  return out;
}

/**
 * A response schema as a tool's `outputSchema`. Clients check every result against it, so it is
 * advertised open to additions: a field a newer service adds during a rolling upgrade must not
 * turn a call that succeeded (a mission already submitted, say) into a client-side error and a
 * retry. For the same reason the server does not re-validate results; the response schemas are
 * checked against the contracts' view types at compile time.
 */
export function advertisedOutputSchema(schema: z.ZodType): StandardSchemaWithJSON<Record<string, unknown>, Record<string, unknown>> {
  const advertised = advertisedSchema(schema)['~standard'];
  return {
    '~standard': {
      ...advertised,
      jsonSchema: {
        input: (options) => openObjects(advertised.jsonSchema.output(options)) as Record<string, unknown>,
        output: (options) => openObjects(advertised.jsonSchema.output(options)) as Record<string, unknown>,
      },
    },
  };
}
