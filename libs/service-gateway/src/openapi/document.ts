import type { INestApplication } from '@nestjs/common';
import { DocumentBuilder, OpenAPIObject, SwaggerModule } from '@nestjs/swagger';
import { type ProblemStatus, Scopes, TENANT_SCOPES, TenantEventSchema } from '@mission/contracts';
import { PROBLEM_CONTENT_TYPE } from '../http/problem';
import { OPERATION_EXTENSION, OperationSpec } from './operation';
import { componentSchemas, openApiSchema, queryParameters } from './schemas';

/** The version of the API contract (the document in libs/api-client/openapi.json), not of the software. */
export const API_VERSION = '1.0.0';
export const OPENAPI_JSON_PATH = '/api/openapi.json';
export const OPENAPI_UI_PATH = '/api/docs';
export const OPENAPI_YAML_PATH = '/api/openapi.yaml';

/** The routes serveOpenApi registers (the document, its UI and the UI's assets): public, as the document says. */
export function isOpenApiRoute(url: string): boolean {
  return url === OPENAPI_JSON_PATH || url === OPENAPI_YAML_PATH || url === OPENAPI_UI_PATH || url.startsWith(`${OPENAPI_UI_PATH}/`);
}

export interface OpenApiOptions {
  readonly publicUrl: string;
  readonly issuer: string;
  readonly version: string;
}

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });

const PROBLEM_DESCRIPTIONS: Readonly<Record<ProblemStatus, string>> = {
  400: 'Malformed JSON (or a body that is not UTF-8) or a validation failure: `errors` lists each field',
  401: 'Missing, malformed, expired or wrongly signed token, or the wrong issuer or audience',
  403: 'The token lacks the scope the operation needs (`WWW-Authenticate` names it), or the browser origin is not allowed',
  404: 'No such resource, or one of another tenant (indistinguishable)',
  409: 'State conflict (HIT item no longer pending, mission already final, idempotent request still in flight)',
  413: 'Body too large (1 MiB; document ingestion 10 MiB)',
  415: 'Body is not `application/json`',
  422: '`Idempotency-Key` reused with a different body',
  429: "The tenant's rate limit is used up: retry after `Retry-After` seconds",
  503: 'A dependency (message bus, database) is unavailable: retry after `Retry-After` seconds',
};

const HEADERS: Record<string, Record<string, unknown>> = {
  'X-Request-Id': { description: "The request's id (the client's own when it sent a sane one)", schema: { type: 'string' } },
  RateLimit: {
    description: 'Remaining quota, draft-ietf-httpapi-ratelimit-headers: `"<tier>";r=<tokens>;t=<seconds>`',
    schema: { type: 'string' },
    example: '"business";r=84;t=1',
  },
  'RateLimit-Policy': { description: 'The tenant\'s quota policy: `"<tier>";q=<limit>;w=60`', schema: { type: 'string' }, example: '"business";q=500;w=60' },
  'Retry-After': { description: 'Seconds to wait before retrying', schema: { type: 'integer', minimum: 1 } },
  'WWW-Authenticate': { description: 'Bearer challenge with `resource_metadata` (RFC 9728), and `error`/`scope` (RFC 6750)', schema: { type: 'string' } },
  Location: { description: 'Where the created resource is', schema: { type: 'string' } },
};
const header = (name: string) => ({ $ref: `#/components/headers/${name}` });

function problemStatuses(spec: OperationSpec): ProblemStatus[] {
  const statuses = new Set<ProblemStatus>(spec.problems ?? []);
  if (spec.access !== 'public') [401, 403, 503].forEach((status) => statuses.add(status as ProblemStatus));
  if (typeof spec.access === 'object') statuses.add(429);
  if (spec.body) [400, 413, 415].forEach((status) => statuses.add(status as ProblemStatus));
  if (spec.query || spec.pathId) statuses.add(400);
  return [...statuses].sort();
}

function successContent(spec: OperationSpec): Record<string, unknown> | undefined {
  const { schema, example } = spec.success;
  if (!schema) return undefined;
  const withExample = (media: Record<string, unknown>) => (example === undefined ? media : { ...media, example });
  switch (schema) {
    case 'text':
      return { 'text/plain': withExample({ schema: { type: 'string' } }) };
    case 'event-stream':
      return {
        'text/event-stream': withExample({
          schema: {
            type: 'string',
            description: 'Server-sent events, each `id: <event id>`, `event: <type>`, `data: <the event as JSON, as in x-event-data>`, and a comment line at least every 15 s',
          },
          // What each event's `data` line holds (OpenAPI 3.1 has no schema for a stream's items).
          'x-event-data': openApiSchema(TenantEventSchema, 'output'),
        }),
      };
    case 'json-rpc':
      return {
        'application/json': withExample({ schema: { type: 'object', description: 'A JSON-RPC 2.0 response' } }),
        'text/event-stream': { schema: { type: 'string', description: 'JSON-RPC messages as server-sent events (2025-era clients)' } },
      };
    case 'health':
      return {
        'application/json': withExample({ schema: { type: 'object', required: ['status'], properties: { status: { enum: ['up', 'down'] }, details: { type: 'object' } } } }),
      };
    case 'resource-metadata':
      return {
        'application/json': withExample({
          schema: {
            type: 'object',
            required: ['resource', 'authorization_servers'],
            properties: {
              resource: { type: 'string', format: 'uri' },
              authorization_servers: { type: 'array', items: { type: 'string', format: 'uri' } },
              scopes_supported: { type: 'array', items: { type: 'string' } },
              bearer_methods_supported: { type: 'array', items: { const: 'header' } },
              resource_name: { type: 'string' },
            },
          },
        }),
      };
    default:
      return { 'application/json': withExample({ schema: ref(schema) }) };
  }
}

/** Turns a route's OperationSpec into parameters, body, responses and security. */
function expand(operation: Record<string, unknown>, spec: OperationSpec): void {
  const tenant = typeof spec.access === 'object';
  const commonHeaders: Record<string, unknown> = {
    'X-Request-Id': header('X-Request-Id'),
    ...(tenant ? { RateLimit: header('RateLimit'), 'RateLimit-Policy': header('RateLimit-Policy') } : {}),
  };

  const parameters: Array<Record<string, unknown>> = [];
  if (spec.pathId) parameters.push({ name: 'id', in: 'path', required: true, description: spec.pathId, schema: { type: 'string' } });
  if (spec.query) parameters.push(...queryParameters(spec.query));
  if (spec.idempotencyKey) {
    parameters.push({
      name: 'Idempotency-Key',
      in: 'header',
      required: false,
      description:
        'Kept 24 h: a repeat with the same key and body (the same JSON, in any key order) returns the same mission; any other body is 422; the original still in flight is 409',
      schema: { type: 'string', pattern: '^[\\x21-\\x7e]{1,255}$' },
    });
  }
  if (spec.lastEventId) {
    parameters.push({
      name: 'Last-Event-ID',
      in: 'header',
      required: false,
      description:
        'The id of the last event the client received: the stream starts with every later event, then live ones (no gap, no repeat). Unknown or older than the log keeps (7 days at least): 400 `cursor_expired`. Absent: the stream starts with the next event.',
      schema: { type: 'string', maxLength: 64 },
    });
  }
  operation.parameters = parameters;

  if (spec.body) {
    const schema = spec.body.schema === 'json-rpc' ? { type: 'object', description: 'A JSON-RPC 2.0 request or notification' } : ref(spec.body.schema);
    operation.requestBody = {
      required: spec.body.required,
      content: { 'application/json': { schema, ...(spec.body.example === undefined ? {} : { example: spec.body.example }) } },
    };
  } else {
    delete operation.requestBody;
  }

  const responses: Record<string, unknown> = {
    [String(spec.success.status)]: {
      description: spec.success.description,
      headers: { ...commonHeaders, ...(spec.success.location ? { Location: header('Location') } : {}) },
      ...(successContent(spec) ? { content: successContent(spec) } : {}),
    },
  };
  for (const status of problemStatuses(spec)) {
    const extra: Record<string, unknown> = {};
    if (status === 401 || status === 403) extra['WWW-Authenticate'] = header('WWW-Authenticate');
    if (status === 429 || status === 503) extra['Retry-After'] = header('Retry-After');
    responses[String(status)] = {
      description: PROBLEM_DESCRIPTIONS[status],
      headers: { ...commonHeaders, ...extra },
      content: { [PROBLEM_CONTENT_TYPE]: { schema: ref('Problem') } },
    };
  }
  operation.responses = responses;

  if (spec.access === 'public') operation.security = [];
  else operation.security = [{ oauth2: spec.access === 'operator' ? [Scopes.platformAdmin] : [...spec.access.scopes] }];
  delete operation[OPERATION_EXTENSION];
}

/**
 * The OpenAPI 3.1 document of the gateway, generated from its controllers (@nestjs/swagger) and
 * completed from each route's OperationSpec and the contracts' schemas.
 */
export function createOpenApiDocument(app: INestApplication, options: OpenApiOptions): OpenAPIObject {
  const issuer = options.issuer.replace(/\/$/, '');
  const scopes = Object.fromEntries([...TENANT_SCOPES.map((scope) => [scope, `tenant: ${scope}`]), [Scopes.platformAdmin, 'the platform operator']]);
  const config = new DocumentBuilder()
    .setOpenAPIVersion('3.1.0')
    .setTitle('Mission Service API')
    .setVersion(options.version)
    .setDescription(
      'Missions (long-running jobs that consult the Brain and may wait for a human), the Brain (a tenant-scoped knowledge store) and HIT items ' +
        '(human approvals), for the tenant of the bearer token. Errors are RFC 9457 problem details. Tenant requests share one rate limit per tenant, ' +
        'reported in the RateLimit headers. The same operations are MCP tools at `/mcp`.',
    )
    .addServer(options.publicUrl.replace(/\/$/, ''))
    .addOAuth2(
      {
        type: 'oauth2',
        description: `Access tokens (JWT, 1 hour) from ${issuer}; tenant clients use client_credentials, a tenant's users authorization_code with PKCE S256.`,
        flows: {
          clientCredentials: { tokenUrl: `${issuer}/token`, scopes },
          authorizationCode: { authorizationUrl: `${issuer}/auth`, tokenUrl: `${issuer}/token`, refreshUrl: `${issuer}/token`, scopes },
        },
      },
      'oauth2',
    )
    .build();
  const document = SwaggerModule.createDocument(app, config, { operationIdFactory: (_controller, method) => method });
  for (const path of Object.values(document.paths)) {
    for (const operation of Object.values(path) as Array<Record<string, unknown>>) {
      const spec = operation[OPERATION_EXTENSION] as OperationSpec | undefined;
      if (!spec) throw new Error(`Route ${String(operation.operationId)} has no OperationSpec: document it with @Operation`);
      expand(operation, spec);
    }
  }
  document.components = {
    ...document.components,
    schemas: componentSchemas() as NonNullable<OpenAPIObject['components']>['schemas'],
    headers: HEADERS as NonNullable<OpenAPIObject['components']>['headers'],
  };
  document.tags = [
    { name: 'Missions', description: 'Long-running jobs of the tenant' },
    { name: 'Brain', description: "The tenant's knowledge store: documents and ranked passages (BM25)" },
    { name: 'HIT items', description: 'Human approval tasks that missions wait for' },
    { name: 'Webhooks', description: "The tenant's events pushed to its HTTPS endpoints, signed as Standard Webhooks specify" },
    { name: 'Events', description: "State changes of the tenant's missions and approval items, pushed: a resumable stream" },
    { name: 'MCP', description: 'The same operations as Model Context Protocol tools' },
    { name: 'Operator', description: 'Provisioning, for the platform operator (`platform:admin`)' },
    { name: 'Discovery and operations', description: 'Public: OAuth discovery, health and metrics' },
  ];
  return document;
}

/** Serves the document at /api/openapi.json and Swagger UI at /api/docs (both public). */
export function serveOpenApi(app: INestApplication, document: OpenAPIObject): void {
  SwaggerModule.setup(OPENAPI_UI_PATH.slice(1), app, document, {
    jsonDocumentUrl: OPENAPI_JSON_PATH.slice(1),
    yamlDocumentUrl: OPENAPI_YAML_PATH.slice(1),
    customSiteTitle: 'Mission Service API',
  });
}

/** The URLs the committed document (libs/api-client/openapi.json) is rendered with: `npm start`'s defaults. */
export const REFERENCE_URLS = { publicUrl: 'http://127.0.0.1:3000', issuer: 'http://127.0.0.1:3001' } as const;
