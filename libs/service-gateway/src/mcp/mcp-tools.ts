import type { StandardSchemaWithJSON, ToolAnnotations } from '@modelcontextprotocol/server';
import type { z } from 'zod';
import {
  BrainQuerySchema,
  DecideHitBodySchema,
  IngestDocumentSchema,
  ListMissionsQuerySchema,
  PageQuerySchema,
  parseOrThrow,
  ResourceIdSchema,
  Scope,
  Scopes,
  SubmitMissionSchema,
} from '@mission/contracts';
import { RESPONSE_SCHEMAS } from '../openapi/schemas';
import type { BrainOperations } from '../operations/brain.operations';
import type { HitOperations } from '../operations/hits.operations';
import type { MissionOperations } from '../operations/missions.operations';

/** The application services the tools call: the very ones behind the REST routes. */
export interface GatewayOperations {
  readonly missions: MissionOperations;
  readonly brain: BrainOperations;
  readonly hits: HitOperations;
}

export interface ToolCaller {
  /** The token's subject, recorded as who decided a HIT item. */
  readonly subject: string;
}

export interface McpTool {
  readonly name: string;
  readonly title: string;
  readonly description: string;
  /** The scope of the REST twin; a token without it gets 403 insufficient_scope. */
  readonly scope: Scope;
  /** The contract that validates the REST request; the tool's JSON Schema is generated from it. */
  readonly input: z.ZodType;
  /** The REST response body's schema (the OpenAPI document's), advertised as the tool's outputSchema. */
  readonly output: z.ZodType;
  readonly annotations: ToolAnnotations;
  run(args: Record<string, unknown>, operations: GatewayOperations, caller: ToolCaller): Promise<object>;
}

const DecideHitToolSchema = ResourceIdSchema.extend(DecideHitBodySchema.shape);

function decision(kind: 'approved' | 'rejected'): McpTool['run'] {
  return ({ id, ...body }, { hits }, caller) => hits.decide(id, kind, body, caller.subject);
}

/** Every operation an agent can run, named as API.md fixes them. */
export const MCP_TOOLS: readonly McpTool[] = [
  {
    name: 'submit_mission',
    title: 'Submit a mission',
    description:
      'Starts a long-running mission for your organisation and returns it at once (status "queued"); poll get_mission until its status is final ' +
      '(succeeded, failed, rejected or cancelled). A mission runs its steps in order: "brain.query" searches the knowledge store (query defaults to the objective), ' +
      '"approval" creates a HIT item and waits, as "awaiting_approval", until a human approves or rejects it (see list_pending_hits). ' +
      'Without steps the mission runs one brain.query on its objective. At most 20 steps.',
    scope: Scopes.missionsWrite,
    input: SubmitMissionSchema,
    output: RESPONSE_SCHEMAS.Mission,
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
    run: (args, { missions }) => missions.submit(args),
  },
  {
    name: 'get_mission',
    title: 'Get a mission',
    description:
      'Returns one mission by id with its status, every step (status, output, hitId of an approval step), and its result once succeeded or its error once failed. ' +
      'An unknown id is a not-found error.',
    scope: Scopes.missionsRead,
    input: ResourceIdSchema,
    output: RESPONSE_SCHEMAS.Mission,
    annotations: { readOnlyHint: true, openWorldHint: false },
    run: (args, { missions }) => missions.get(parseOrThrow(ResourceIdSchema, args, 'Request').id),
  },
  {
    name: 'list_missions',
    title: 'List missions',
    description:
      "Lists your organisation's missions, newest first, optionally only those with one status. Returns { items, nextCursor }: pass nextCursor as cursor to read the next page; " +
      'null means there is none. limit is 1 to 100 (default 20).',
    scope: Scopes.missionsRead,
    input: ListMissionsQuerySchema,
    output: RESPONSE_SCHEMAS.MissionPage,
    annotations: { readOnlyHint: true, openWorldHint: false },
    run: (args, { missions }) => missions.list(args),
  },
  {
    name: 'query_brain',
    title: 'Search the knowledge store',
    description:
      "Searches your organisation's knowledge store (the Brain) with a free-text query q and returns the k best passages (1 to 50, default 5), best first, " +
      "each with its documentId, chunkId, title, text, relevance score and source. Only your organisation's documents are searched.",
    scope: Scopes.brainRead,
    input: BrainQuerySchema,
    output: RESPONSE_SCHEMAS.BrainQueryResult,
    annotations: { readOnlyHint: true, openWorldHint: false },
    run: (args, { brain }) => brain.query(args),
  },
  {
    name: 'ingest_document',
    title: 'Add a document to the knowledge store',
    description:
      "Adds a text document (title, content up to 10 MiB, optional source and string metadata) to your organisation's knowledge store. " +
      'It is split into passages and searchable by query_brain as soon as this returns { id, title, chunkCount, createdAt }.',
    scope: Scopes.brainWrite,
    input: IngestDocumentSchema,
    output: RESPONSE_SCHEMAS.IngestedDocument,
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
    run: (args, { brain }) => brain.ingest(args),
  },
  {
    name: 'list_pending_hits',
    title: 'List pending approvals',
    description:
      'Lists the HIT items (human approval tasks) still waiting for a decision, oldest first, each with the missionId it holds up. ' +
      'Returns { items, nextCursor }: pass nextCursor as cursor for the next page. limit is 1 to 100 (default 20).',
    scope: Scopes.hitsRead,
    input: PageQuerySchema,
    output: RESPONSE_SCHEMAS.HitItemPage,
    annotations: { readOnlyHint: true, openWorldHint: false },
    run: (args, { hits }) => hits.listPending(args),
  },
  {
    name: 'approve_hit',
    title: 'Approve a HIT item',
    description:
      'Approves a pending HIT item by id, with an optional comment (at most 2000 characters); its mission then continues with its next step. ' +
      'The decision is recorded under your identity. An item that is already decided is a conflict error.',
    scope: Scopes.hitsApprove,
    input: DecideHitToolSchema,
    output: RESPONSE_SCHEMAS.HitItem,
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
    run: decision('approved'),
  },
  {
    name: 'reject_hit',
    title: 'Reject a HIT item',
    description:
      'Rejects a pending HIT item by id, with an optional comment (at most 2000 characters); its mission then ends with status "rejected". ' +
      'The decision is recorded under your identity. An item that is already decided is a conflict error.',
    scope: Scopes.hitsApprove,
    input: DecideHitToolSchema,
    output: RESPONSE_SCHEMAS.HitItem,
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
    run: decision('rejected'),
  },
];

export const MCP_TOOL_SCOPES: ReadonlyMap<string, Scope> = new Map(MCP_TOOLS.map((tool) => [tool.name, tool.scope]));

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
