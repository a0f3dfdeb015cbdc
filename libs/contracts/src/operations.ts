import { z } from 'zod';
import { BrainQuerySchema, IngestDocumentSchema, MAX_DOCUMENT_BODY_BYTES } from './brain';
import { DecideHitBodySchema, ListHitsQuerySchema } from './hits';
import { Messages, type MessageDefinition } from './messages';
import { ListMissionsQuerySchema, SubmitMissionSchema, WaitForMissionQuerySchema } from './missions';
import { PageQuerySchema } from './pagination';
import { Scopes, type Scope } from './scopes';
import { CreateClientSchema, CreateTenantSchema, CreateUserSchema, UpdateTenantSchema } from './tenants';
import { EventStreamQuerySchema } from './tenant-events';
import { CreateWebhookSchema } from './webhooks';
import { ResourceIdSchema } from './validation';
import { RESPONSE_SCHEMAS } from './views';

/*
 * The catalogue of the platform's public operations. Each is declared once, here: who may call it,
 * the bus message it becomes, its REST route and its MCP tool. The gateway's routes, its access
 * checks, its MCP tools and the OpenAPI document are all derived from these declarations.
 */

/** Request bodies, by the name the OpenAPI document gives them. */
export const REQUEST_SCHEMAS = {
  SubmitMission: SubmitMissionSchema,
  IngestDocument: IngestDocumentSchema,
  BrainQueryBody: BrainQuerySchema,
  HitDecision: DecideHitBodySchema,
  CreateTenant: CreateTenantSchema,
  UpdateTenant: UpdateTenantSchema,
  CreateClient: CreateClientSchema,
  CreateUser: CreateUserSchema,
  CreateWebhook: CreateWebhookSchema,
} as const;

/** The query parameters of each list or search. */
export const QUERY_SCHEMAS = {
  page: PageQuerySchema,
  hits: ListHitsQuerySchema,
  missions: ListMissionsQuerySchema,
  brainQuery: BrainQuerySchema,
  events: EventStreamQuerySchema,
  wait: WaitForMissionQuerySchema,
} as const;

export type SchemaName = keyof typeof RESPONSE_SCHEMAS | keyof typeof REQUEST_SCHEMAS;
export type QueryName = keyof typeof QUERY_SCHEMAS;

/**
 * Who may call an operation: a tenant's token holding every one of `scopes` (and the request is
 * charged to the tenant's rate limit), the platform operator (`platform:admin`), or anyone.
 */
export type OperationAccess = { readonly scopes: readonly Scope[] } | 'operator' | 'public';

export type ProblemStatus = 400 | 401 | 403 | 404 | 409 | 413 | 415 | 422 | 429 | 503;
export type OperationTag = 'Missions' | 'Brain' | 'HIT items' | 'Events' | 'Webhooks' | 'MCP' | 'Operator' | 'Discovery and operations';

/** How an operation is reached over HTTP, and what the OpenAPI document says about it. */
export interface HttpBinding {
  readonly method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  /** Absolute, with `:id` for the one path parameter routes have. */
  readonly path: string;
  readonly operationId: string;
  readonly summary: string;
  readonly description?: string;
  readonly tag: OperationTag;
  /** The body's schema; `label` names it in validation errors ("Mission is invalid"). */
  readonly body?: { readonly schema: keyof typeof REQUEST_SCHEMAS | 'json-rpc'; readonly required: boolean; readonly example?: unknown; readonly label?: string };
  readonly query?: QueryName;
  /** Description of the `:id` path parameter. */
  readonly pathId?: string;
  readonly idempotencyKey?: boolean;
  /** A server-sent event stream a client resumes with `Last-Event-ID`. */
  readonly lastEventId?: boolean;
  /** Bodies up to this many bytes (instead of the gateway's 1 MiB). */
  readonly bodyLimit?: number;
  readonly success: {
    readonly status: number;
    readonly description: string;
    readonly schema?: SchemaName | 'text' | 'json-rpc' | 'health' | 'resource-metadata' | 'event-stream';
    /** A `Location` header naming the created resource: the route's path and the reply's `id`. */
    readonly location?: boolean;
    readonly example?: unknown;
  };
  /** Failures beyond those every route of its kind can have (401/403/429/503 follow from the access, 400/413/415 from the inputs). */
  readonly problems?: readonly ProblemStatus[];
}

/** The operation as an MCP tool: its input is the route's `id` and query or body fields, in one object. */
export interface McpBinding {
  readonly name: string;
  readonly title: string;
  readonly description: string;
  readonly annotations: { readonly readOnlyHint?: boolean; readonly destructiveHint?: boolean; readonly idempotentHint?: boolean; readonly openWorldHint?: boolean };
}

export interface OperationDefinition {
  readonly access: OperationAccess;
  /** The bus message the operation sends (the gateway may add what only it knows, such as the caller). */
  readonly message: MessageDefinition;
  readonly http: HttpBinding;
  readonly mcp?: McpBinding;
}

const operation = <O extends OperationDefinition>(definition: O): O => definition;

const READ_ONLY = { readOnlyHint: true, openWorldHint: false } as const;
const CREATES = { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false } as const;

export const Operations = {
  submitMission: operation({
    access: { scopes: [Scopes.missionsWrite] },
    message: Messages.missionSubmit,
    http: {
      method: 'POST',
      path: '/api/missions',
      operationId: 'submitMission',
      tag: 'Missions',
      summary: 'Submit a mission',
      description:
        'Queues a mission and answers at once; it runs its steps in order (`brain.query`, `approval`). Poll it until its status is final. ' +
        "Its steps act with the caller's authority: a mission with a `brain.query` step (the default step is one) also needs `brain:read`, 403 `insufficient_scope` naming it otherwise.",
      body: {
        schema: 'SubmitMission',
        required: true,
        label: 'Mission',
        example: {
          title: 'Publish report',
          objective: 'Q3 numbers',
          steps: [
            { type: 'brain.query', k: 3 },
            { type: 'approval', title: 'OK to publish?', expiresIn: 86400, assignees: ['ada'] },
          ],
        },
      },
      idempotencyKey: true,
      success: { status: 202, description: 'Accepted: the mission, queued', schema: 'Mission', location: true },
      problems: [409, 422],
    },
    mcp: {
      name: 'submit_mission',
      title: 'Submit a mission',
      description:
        'Starts a long-running mission for your organisation and returns it at once (status "queued"); poll get_mission until its status is final ' +
        '(succeeded, failed, rejected or cancelled). A mission runs its steps in order: "brain.query" searches the knowledge store (query defaults to the objective), ' +
        '"approval" creates a HIT item and waits, as "awaiting_approval", until a human approves or rejects it (see list_pending_hits); ' +
        'it may set expiresIn (seconds, at most 30 days: undecided by then, the item expires and the mission ends "rejected", or "failed" with onExpiry "fail") ' +
        'and assignees (usernames: only those users may decide it). ' +
        'Without steps the mission runs one brain.query on its objective. At most 20 steps.',
      annotations: CREATES,
    },
  }),
  listMissions: operation({
    access: { scopes: [Scopes.missionsRead] },
    message: Messages.missionList,
    http: {
      method: 'GET',
      path: '/api/missions',
      operationId: 'listMissions',
      tag: 'Missions',
      summary: "The tenant's missions, newest first",
      query: 'missions',
      success: { status: 200, description: 'One page of missions', schema: 'MissionPage' },
    },
    mcp: {
      name: 'list_missions',
      title: 'List missions',
      description:
        "Lists your organisation's missions, newest first, optionally only those with one status. Returns { items, nextCursor }: pass nextCursor as cursor to read the next page; " +
        'null means there is none. limit is 1 to 100 (default 20).',
      annotations: READ_ONLY,
    },
  }),
  getMission: operation({
    access: { scopes: [Scopes.missionsRead] },
    message: Messages.missionGet,
    http: {
      method: 'GET',
      path: '/api/missions/:id',
      operationId: 'getMission',
      tag: 'Missions',
      summary: 'One mission with its steps and result',
      pathId: 'the mission id',
      success: { status: 200, description: 'The mission', schema: 'Mission' },
      problems: [404],
    },
    mcp: {
      name: 'get_mission',
      title: 'Get a mission',
      description:
        'Returns one mission by id with its status, every step (status, output, hitId of an approval step), and its result once succeeded or its error once failed. ' +
        'An unknown id is a not-found error.',
      annotations: READ_ONLY,
    },
  }),
  waitForMission: operation({
    access: { scopes: [Scopes.missionsRead] },
    message: Messages.missionGet,
    http: {
      method: 'GET',
      path: '/api/missions/:id/wait',
      operationId: 'waitForMission',
      tag: 'Missions',
      summary: 'The mission once it is final, or as it is when the timeout passes',
      description:
        'Answers as soon as the mission is `succeeded`, `failed`, `rejected` or `cancelled` (at once if it is already), or after `timeoutSeconds` (1–60, default 30) with the mission as it is then: a client that must know when a mission ends need not poll.',
      pathId: 'the mission id',
      query: 'wait',
      success: { status: 200, description: 'The mission, final unless the timeout passed first', schema: 'Mission' },
      problems: [404],
    },
    mcp: {
      name: 'wait_for_mission',
      title: 'Wait for a mission to finish',
      description:
        'Waits until the mission with this id is final (succeeded, failed, rejected or cancelled) and returns it, or returns it as it is after timeoutSeconds (1 to 60, default 30). ' +
        'Call it again to keep waiting; no need to poll get_mission.',
      annotations: READ_ONLY,
    },
  }),
  cancelMission: operation({
    access: { scopes: [Scopes.missionsWrite] },
    message: Messages.missionCancel,
    http: {
      method: 'POST',
      path: '/api/missions/:id/cancel',
      operationId: 'cancelMission',
      tag: 'Missions',
      summary: 'Cancel a mission that is not final',
      description: 'A HIT item the mission waits for is closed and leaves the pending list.',
      pathId: 'the mission id',
      success: { status: 200, description: 'The mission, cancelled', schema: 'Mission' },
      problems: [404, 409],
    },
  }),
  ingestDocument: operation({
    access: { scopes: [Scopes.brainWrite] },
    message: Messages.brainDocumentIngest,
    http: {
      method: 'POST',
      path: '/api/brain/documents',
      operationId: 'ingestDocument',
      tag: 'Brain',
      summary: 'Store and index a document',
      description: 'Splits the text into passages and indexes them; searchable as soon as this answers. Content up to 10 MiB (UTF-8).',
      bodyLimit: MAX_DOCUMENT_BODY_BYTES,
      body: {
        schema: 'IngestDocument',
        required: true,
        example: { title: 'Dielectrics', content: 'The dielectric constant of liquids is measured with microwave techniques.', source: 'lab-notes' },
      },
      success: { status: 201, description: 'Created', schema: 'IngestedDocument', location: true },
    },
    mcp: {
      name: 'ingest_document',
      title: 'Add a document to the knowledge store',
      description:
        "Adds a text document (title, content up to 10 MiB, optional source and string metadata) to your organisation's knowledge store. " +
        'It is split into passages and searchable by query_brain as soon as this returns { id, title, chunkCount, createdAt }.',
      annotations: CREATES,
    },
  }),
  listDocuments: operation({
    access: { scopes: [Scopes.brainRead] },
    message: Messages.brainDocumentList,
    http: {
      method: 'GET',
      path: '/api/brain/documents',
      operationId: 'listDocuments',
      tag: 'Brain',
      summary: "The tenant's documents, newest first",
      query: 'page',
      success: { status: 200, description: 'One page of documents (without their text)', schema: 'BrainDocumentPage' },
    },
  }),
  getDocument: operation({
    access: { scopes: [Scopes.brainRead] },
    message: Messages.brainDocumentGet,
    http: {
      method: 'GET',
      path: '/api/brain/documents/:id',
      operationId: 'getDocument',
      tag: 'Brain',
      summary: 'One document (without its text)',
      pathId: 'the document id',
      success: { status: 200, description: 'The document', schema: 'BrainDocument' },
      problems: [404],
    },
  }),
  deleteDocument: operation({
    access: { scopes: [Scopes.brainWrite] },
    message: Messages.brainDocumentDelete,
    http: {
      method: 'DELETE',
      path: '/api/brain/documents/:id',
      operationId: 'deleteDocument',
      tag: 'Brain',
      summary: 'Delete a document with its passages and index entries',
      pathId: 'the document id',
      success: { status: 204, description: 'Deleted' },
      problems: [404],
    },
  }),
  listDocumentPassages: operation({
    access: { scopes: [Scopes.brainRead] },
    message: Messages.brainDocumentPassages,
    http: {
      method: 'GET',
      path: '/api/brain/documents/:id/passages',
      operationId: 'listDocumentPassages',
      tag: 'Brain',
      summary: "A document's passages in order, as they were indexed",
      description: 'The text a query can answer with, passage by passage from the first; pages as the other lists do.',
      pathId: 'the document id',
      query: 'page',
      success: { status: 200, description: 'One page of passages', schema: 'PassagePage' },
      problems: [404],
    },
  }),
  queryBrain: operation({
    access: { scopes: [Scopes.brainRead] },
    message: Messages.brainQuery,
    http: {
      method: 'GET',
      path: '/api/brain/query',
      operationId: 'queryBrain',
      tag: 'Brain',
      summary: 'The best passages for a query, best first (BM25)',
      description:
        "Only the caller's tenant's documents are searched. Any text is a valid query; an empty one is 400, and so may be one whose words more than 4,000,000 passages hold, counted once for each word.",
      query: 'brainQuery',
      success: { status: 200, description: 'Ranked passages', schema: 'BrainQueryResult' },
    },
    mcp: {
      name: 'query_brain',
      title: 'Search the knowledge store',
      description:
        "Searches your organisation's knowledge store (the Brain) with a free-text query q and returns the k best passages (1 to 50, default 5), best first, " +
        "each with its documentId, chunkId, title, text, relevance score and source. Only your organisation's documents are searched.",
      annotations: READ_ONLY,
    },
  }),
  queryBrainWithBody: operation({
    access: { scopes: [Scopes.brainRead] },
    message: Messages.brainQuery,
    http: {
      method: 'POST',
      path: '/api/brain/query',
      operationId: 'queryBrainWithBody',
      tag: 'Brain',
      summary: 'The best passages for a query sent in the body, best first (BM25)',
      description:
        'The same search as `GET /api/brain/query`, for queries whose URL would pass the 16 KiB limit of a request line and its headers (a query of up to 10,000 characters in any script fits a body). Searches nothing else and changes nothing.',
      body: { schema: 'BrainQueryBody', required: true, label: 'Body', example: { q: 'microwave dielectrics', k: 3 } },
      success: { status: 200, description: 'Ranked passages', schema: 'BrainQueryResult' },
    },
  }),
  listPendingHits: operation({
    access: { scopes: [Scopes.hitsRead] },
    message: Messages.hitListPending,
    http: {
      method: 'GET',
      path: '/api/hit',
      operationId: 'listPendingHits',
      tag: 'HIT items',
      summary: 'Pending HIT items, oldest first',
      query: 'hits',
      success: { status: 200, description: 'One page of pending items; with assignedTo=me, only those assigned to the calling user', schema: 'HitItemPage' },
      problems: [403],
    },
    mcp: {
      name: 'list_pending_hits',
      title: 'List pending approvals',
      description:
        'Lists the HIT items (human approval tasks) still waiting for a decision, oldest first, each with the missionId it holds up, ' +
        'its expiresAt (if its step set a deadline) and its assignees (if only named users may decide it). ' +
        'assignedTo "me" keeps the items assigned to the signed-in user (a machine client has none: that is a forbidden error). ' +
        'Returns { items, nextCursor }: pass nextCursor as cursor for the next page. limit is 1 to 100 (default 20).',
      annotations: READ_ONLY,
    },
  }),
  getHit: operation({
    access: { scopes: [Scopes.hitsRead] },
    message: Messages.hitGet,
    http: {
      method: 'GET',
      path: '/api/hit/:id',
      operationId: 'getHit',
      tag: 'HIT items',
      summary: 'One HIT item, pending or decided',
      pathId: 'the HIT item id',
      success: { status: 200, description: 'The item', schema: 'HitItem' },
      problems: [404],
    },
  }),
  approveHit: operation({
    access: { scopes: [Scopes.hitsApprove] },
    message: Messages.hitDecide,
    http: {
      method: 'POST',
      path: '/api/hit/:id/approve',
      operationId: 'approveHit',
      tag: 'HIT items',
      summary: 'Approve a pending item; its mission continues',
      pathId: 'the HIT item id',
      body: { schema: 'HitDecision', required: false, label: 'Decision', example: { comment: 'Go' } },
      success: { status: 200, description: 'The item, approved, with decidedAt and decidedBy (the token subject)', schema: 'HitItem' },
      problems: [403, 404, 409],
    },
    mcp: {
      name: 'approve_hit',
      title: 'Approve a HIT item',
      description:
        'Approves a pending HIT item by id, with an optional comment (at most 2000 characters); its mission then continues with its next step. ' +
        'The decision is recorded under your identity. An item that is already decided or expired is a conflict error; an item with assignees may be decided only by one of those users (not_an_assignee otherwise).',
      annotations: CREATES,
    },
  }),
  rejectHit: operation({
    access: { scopes: [Scopes.hitsApprove] },
    message: Messages.hitDecide,
    http: {
      method: 'POST',
      path: '/api/hit/:id/reject',
      operationId: 'rejectHit',
      tag: 'HIT items',
      summary: 'Reject a pending item; its mission ends rejected',
      pathId: 'the HIT item id',
      body: { schema: 'HitDecision', required: false, label: 'Decision', example: { comment: 'Numbers are off' } },
      success: { status: 200, description: 'The item, rejected', schema: 'HitItem' },
      problems: [403, 404, 409],
    },
    mcp: {
      name: 'reject_hit',
      title: 'Reject a HIT item',
      description:
        'Rejects a pending HIT item by id, with an optional comment (at most 2000 characters); its mission then ends with status "rejected". ' +
        'The decision is recorded under your identity. An item that is already decided or expired is a conflict error; an item with assignees may be decided only by one of those users (not_an_assignee otherwise).',
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
    },
  }),
  createWebhook: operation({
    access: { scopes: [Scopes.webhooksManage] },
    message: Messages.webhookCreate,
    http: {
      method: 'POST',
      path: '/api/webhooks',
      operationId: 'createWebhook',
      tag: 'Webhooks',
      summary: 'Subscribe an HTTPS endpoint to event types; the signing secret is shown only now',
      description:
        'Each event of the types is POSTed to the URL as JSON, signed as Standard Webhooks specify (`webhook-id`, `webhook-timestamp`, `webhook-signature: v1,<base64 HMAC-SHA256>`), ' +
        'and retried on the configured schedule until a 2xx answer within 10 s. The URL must be https:// and must not name or resolve to a loopback, private, link-local or metadata address (400 otherwise).',
      body: { schema: 'CreateWebhook', required: true, label: 'Webhook', example: { url: 'https://example.com/hooks/missions', events: ['mission.completed'] } },
      success: { status: 201, description: 'The webhook, with its secret (shown only now)', schema: 'CreatedWebhook', location: true },
      problems: [409],
    },
  }),
  listWebhooks: operation({
    access: { scopes: [Scopes.webhooksManage] },
    message: Messages.webhookList,
    http: {
      method: 'GET',
      path: '/api/webhooks',
      operationId: 'listWebhooks',
      tag: 'Webhooks',
      summary: "The tenant's webhooks, newest first",
      query: 'page',
      success: { status: 200, description: 'One page of webhooks (no secrets)', schema: 'WebhookPage' },
    },
  }),
  getWebhook: operation({
    access: { scopes: [Scopes.webhooksManage] },
    message: Messages.webhookGet,
    http: {
      method: 'GET',
      path: '/api/webhooks/:id',
      operationId: 'getWebhook',
      tag: 'Webhooks',
      summary: 'One webhook (without its secret)',
      pathId: 'the webhook id',
      success: { status: 200, description: 'The webhook', schema: 'Webhook' },
      problems: [404],
    },
  }),
  deleteWebhook: operation({
    access: { scopes: [Scopes.webhooksManage] },
    message: Messages.webhookDelete,
    http: {
      method: 'DELETE',
      path: '/api/webhooks/:id',
      operationId: 'deleteWebhook',
      tag: 'Webhooks',
      summary: 'Delete a webhook; nothing more is sent to it',
      pathId: 'the webhook id',
      success: { status: 204, description: 'Deleted' },
      problems: [404],
    },
  }),
  listWebhookDeliveries: operation({
    access: { scopes: [Scopes.webhooksManage] },
    message: Messages.webhookDeliveries,
    http: {
      method: 'GET',
      path: '/api/webhooks/:id/deliveries',
      operationId: 'listWebhookDeliveries',
      tag: 'Webhooks',
      summary: "The webhook's delivery attempts, newest first",
      pathId: 'the webhook id',
      query: 'page',
      success: { status: 200, description: 'One page of attempts', schema: 'WebhookDeliveryPage' },
      problems: [404],
    },
  }),
  testWebhook: operation({
    access: { scopes: [Scopes.webhooksManage] },
    message: Messages.webhookTest,
    http: {
      method: 'POST',
      path: '/api/webhooks/:id/test',
      operationId: 'testWebhook',
      tag: 'Webhooks',
      summary: 'Send a `webhook.test` event to the webhook now',
      description: 'The test event is delivered like any other (signed, retried); its attempts appear among the deliveries.',
      pathId: 'the webhook id',
      success: { status: 202, description: 'The delivery, queued', schema: 'WebhookDelivery' },
      problems: [404],
    },
  }),
  createTenant: operation({
    access: 'operator',
    message: Messages.tenantCreate,
    http: {
      method: 'POST',
      path: '/admin/tenants',
      operationId: 'createTenant',
      tag: 'Operator',
      summary: 'Provision a tenant with a machine client holding all seven tenant scopes',
      body: { schema: 'CreateTenant', required: true, label: 'Tenant', example: { name: 'Acme', tier: 'business' } },
      success: { status: 201, description: 'The tenant and its client; the secret is shown only here', schema: 'CreatedTenant' },
    },
  }),
  getTenant: operation({
    access: 'operator',
    message: Messages.tenantGet,
    http: {
      method: 'GET',
      path: '/admin/tenants/:id',
      operationId: 'getTenant',
      tag: 'Operator',
      summary: 'One tenant',
      pathId: 'the tenant id',
      success: { status: 200, description: 'The tenant', schema: 'Tenant' },
      problems: [404],
    },
  }),
  getTenantUsage: operation({
    access: 'operator',
    message: Messages.brainUsageGet,
    http: {
      method: 'GET',
      path: '/admin/tenants/:id/usage',
      operationId: 'getTenantUsage',
      tag: 'Operator',
      summary: 'What a tenant stores in the Brain, against its storage quota',
      pathId: 'the tenant id',
      success: { status: 200, description: 'Documents and bytes of content, used and allowed', schema: 'TenantUsage' },
      problems: [404],
    },
  }),
  updateTenant: operation({
    access: 'operator',
    message: Messages.tenantUpdate,
    http: {
      method: 'PATCH',
      path: '/admin/tenants/:id',
      operationId: 'updateTenant',
      tag: 'Operator',
      summary: "Change a tenant's tier, rpm or (enterprise) storage quota",
      description: 'The new limits apply to the next requests (within 5 s) without new tokens.',
      pathId: 'the tenant id',
      body: { schema: 'UpdateTenant', required: true, label: 'Tenant', example: { tier: 'enterprise', rpm: 5000 } },
      success: { status: 200, description: 'The tenant', schema: 'Tenant' },
      problems: [404],
    },
  }),
  createClient: operation({
    access: 'operator',
    message: Messages.clientCreate,
    http: {
      method: 'POST',
      path: '/admin/tenants/:id/clients',
      operationId: 'createClient',
      tag: 'Operator',
      summary: 'Another client of a tenant',
      description: 'Redirect URIs let the client sign users in (authorization_code with PKCE).',
      pathId: 'the tenant id',
      body: { schema: 'CreateClient', required: false, label: 'Client', example: { scopes: ['missions:read', 'hits:read'] } },
      success: { status: 201, description: 'The client; the secret is shown only here', schema: 'ClientCredentials' },
      problems: [404],
    },
  }),
  createUser: operation({
    access: 'operator',
    message: Messages.userCreate,
    http: {
      method: 'POST',
      path: '/admin/tenants/:id/users',
      operationId: 'createUser',
      tag: 'Operator',
      summary: "A tenant's user, who signs in on the identity provider's login page",
      pathId: 'the tenant id',
      body: {
        schema: 'CreateUser',
        required: true,
        label: 'User',
        example: { username: 'ada', password: 'correct horse battery staple', scopes: ['hits:read', 'hits:approve'] },
      },
      success: { status: 201, description: 'The user (never the password)', schema: 'User' },
      problems: [404, 409],
    },
  }),
  rotateSigningKey: operation({
    access: 'operator',
    message: Messages.signingKeyRotate,
    http: {
      method: 'POST',
      path: '/admin/keys/rotate',
      operationId: 'rotateSigningKey',
      tag: 'Operator',
      summary: 'Publish a new signing key for the identity provider',
      description: 'The key is in the JWKS at once and signs from `activatesAt`; 409 while a rotation is pending.',
      success: { status: 201, description: 'The new key', schema: 'SigningKeyRotation' },
      problems: [409],
    },
  }),
} as const;
export type OperationName = keyof typeof Operations;

/** The fields a client sends: the route's `id`, and its query or body fields. */
export function operationInputSchema(operation: OperationDefinition): z.ZodObject {
  const fields =
    operation.http.body && operation.http.body.schema !== 'json-rpc'
      ? REQUEST_SCHEMAS[operation.http.body.schema]
      : operation.http.query
        ? QUERY_SCHEMAS[operation.http.query]
        : z.strictObject({});
  return operation.http.pathId ? ResourceIdSchema.extend(fields.shape) : fields;
}
