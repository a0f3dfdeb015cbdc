import { Inject, Injectable } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import {
  CreateClientSchema,
  CreateUserSchema,
  DomainError,
  ErrorCode,
  FINAL_MISSION_STATUSES,
  IDEMPOTENCY_KEY_PATTERN,
  Messages,
  type MissionView,
  type OperationDefinition,
  type OperationName,
  Operations,
  parseIngestDocument,
  parseOrThrow,
  type PayloadOf,
  QUERY_SCHEMAS,
  REQUEST_SCHEMAS,
  ResourceIdSchema,
  scopesMissionNeeds,
  SubmitMissionSchema,
  type SubmitMissionRequest,
  type TenantUsageView,
  UpdateTenantSchema,
  WaitForMissionQuerySchema,
} from '@mission/contracts';
import { hashSecret } from '@mission/crypto';
import { type MessageBus, requestMessage, type RequestOptions } from '@mission/messaging';
import { currentTenant, runWithTenant } from '@mission/tenant-context';
import { insufficientScopeProblem } from '../auth/authenticate';
import { BUS, GATEWAY_OPTIONS, GatewayOptions } from '../gateway.options';
import { TenantRateLimiter } from '../rate-limit/tenant-rate-limiter';
import { TenantEventFeed } from '../events/tenant-event-feed';

/** Indexing a 10 MiB document takes seconds, far beyond the bus's default request timeout. */
export const INGEST_TIMEOUT_MS = 120_000;
/** A mission being waited for is read again this often, in case the event feed missed its completion. */
const WAIT_REREAD_MS = 5_000;

/** An operation's input as a transport delivers it, unchecked. */
export interface OperationRequest {
  /** The route's `:id`, or the tool's `id` argument. */
  readonly id?: unknown;
  /** The query parameters or the body (REST), the other arguments (MCP). */
  readonly fields: unknown;
  readonly idempotencyKey?: string;
}

/** Who calls, as the token established it. */
export interface OperationCaller {
  readonly subject: string;
  readonly scopes: ReadonlySet<string>;
  /** A person's token: the user's name (the token's claim). Absent for a machine client. */
  readonly username?: string;
}

type MessageOf<K extends OperationName> = (typeof Operations)[K]['message'];

/** What an operation without a body or query takes besides its `id`: nothing. */
const NO_FIELDS = z.strictObject({});

/** The fields an operation takes besides its `id`, what its validation errors call them, and whether they may be left out. */
function fieldsOf(operation: OperationDefinition): { schema: z.ZodType; label: string; optional: boolean } {
  const { body, query } = operation.http;
  if (body && body.schema !== 'json-rpc') return { schema: REQUEST_SCHEMAS[body.schema], label: body.label ?? 'Body', optional: !body.required };
  if (query) return { schema: QUERY_SCHEMAS[query], label: 'Query', optional: true };
  return { schema: NO_FIELDS, label: 'Request', optional: true };
}

/** The route's `id` (the tool's `id` argument), or a validation failure naming it as the payload would. */
function idOf(request: OperationRequest, label: string): string {
  return parseOrThrow(ResourceIdSchema, { id: request.id }, label).id;
}

function idempotencyKeyOf(key: string | undefined): string | undefined {
  if (key === undefined) return undefined;
  if (!IDEMPOTENCY_KEY_PATTERN.test(key)) {
    throw new DomainError(ErrorCode.ValidationFailed, 'The Idempotency-Key header is invalid', [
      { field: 'Idempotency-Key', message: 'must be 1 to 255 visible ASCII characters' },
    ]);
  }
  return key;
}

/**
 * Runs the catalogue's operations for REST routes and MCP tools alike: checks the caller's input,
 * builds the operation's bus message and sends it. Most operations send their checked input as it
 * is; the few that add what only the gateway knows (the caller, the tenant's quota, a password's
 * hash) say so in `payloads` below.
 */
@Injectable()
export class OperationRunner {
  /** Payloads that differ from the checked input, by operation. */
  private readonly payloads: { readonly [K in OperationName]?: (request: OperationRequest, caller: OperationCaller) => Promise<PayloadOf<MessageOf<K>>> } = {
    /**
     * The body goes to mission-service as the client sent it: that is what an Idempotency-Key's
     * fingerprint is taken of, so a body that differs only in what validation normalises is
     * another request (422), not a repeat. A mission's steps act with its submitter's authority: a
     * step that reads the Brain needs `brain:read` (403 `insufficient_scope` naming it), and the
     * caller's scopes travel with the command so that mission-service records what its steps may do.
     */
    submitMission: async (request, caller) => {
      const mission = parseOrThrow(SubmitMissionSchema, request.fields, 'Mission');
      const key = idempotencyKeyOf(request.idempotencyKey);
      const missing = scopesMissionNeeds(mission).filter((scope) => !caller.scopes.has(scope));
      if (missing.length > 0) throw insufficientScopeProblem(this.options.publicUrl, missing);
      await this.checkAssignees(mission);
      return { mission: request.fields, scopes: [...caller.scopes], ...(key ? { idempotencyKey: key } : {}) };
    },
    /** Stored within the tenant's storage quota, which brain-service checks as it stores (403 quota_exceeded beyond it). */
    ingestDocument: async (request) => {
      const document = parseIngestDocument(request.fields);
      const quota = await this.tenants.storageQuotaOf(currentTenant().tenantId);
      if (!quota) throw DomainError.notFound('Tenant');
      return { document, quota };
    },
    /** `assignedTo=me` names the caller's user, from the token: a machine client has no items of its own (403). */
    listPendingHits: async (request, caller) => {
      const { assignedTo, ...page } = parseOrThrow(QUERY_SCHEMAS.hits, request.fields ?? {}, 'Query');
      if (assignedTo === undefined) return page;
      if (caller.username === undefined) throw new DomainError(ErrorCode.NotAnAssignee, 'assignedTo=me lists the items of a signed-in user; this token is a machine client’s');
      return { ...page, assignee: caller.username };
    },
    approveHit: (request, caller) => this.decision(request, caller, 'approved'),
    rejectHit: (request, caller) => this.decision(request, caller, 'rejected'),
    updateTenant: async (request) => ({ id: idOf(request, 'Tenant'), patch: parseOrThrow(UpdateTenantSchema, request.fields, 'Tenant') }),
    createClient: async (request) => ({ tenantId: idOf(request, 'Client'), body: parseOrThrow(CreateClientSchema, request.fields ?? {}, 'Client') }),
    /** Hashed here, so the password never reaches the bus (or a broker's log). */
    createUser: async (request) => {
      const { password, ...user } = parseOrThrow(CreateUserSchema, request.fields, 'User');
      return { tenantId: idOf(request, 'User'), ...user, passwordHash: await hashSecret(password) };
    },
  };

  /** Operations that take more than their one message. */
  private readonly compositions: { readonly [K in OperationName]?: (request: OperationRequest) => Promise<unknown> } = {
    getTenantUsage: async (request): Promise<TenantUsageView> => {
      const tenant = await requestMessage(this.bus, Operations.getTenant.message, { id: idOf(request, 'Request') });
      // Asked as the tenant: brain-service reads its statistics under the tenant's row-level security.
      const used = await runWithTenant({ tenantId: tenant.id }, () => requestMessage(this.bus, Operations.getTenantUsage.message, {}));
      return { tenantId: tenant.id, documents: { used: used.documents, limit: tenant.storage.documents }, bytes: { used: used.bytes, limit: tenant.storage.bytes } };
    },
    /**
     * The mission once it is final: read, then (unless final) woken by its `mission.completed`
     * event from the feed, read again every few seconds in case the feed missed it, and read one
     * last time when the timeout passes.
     */
    waitForMission: async (request): Promise<MissionView> => {
      const id = idOf(request, 'Request');
      const { timeoutSeconds } = parseOrThrow(WaitForMissionQuerySchema, request.fields ?? {}, 'Query');
      const deadline = Date.now() + timeoutSeconds * 1000;
      let wake = (): void => undefined;
      let settled = false;
      const woken = new Promise<void>((resolve) => (wake = resolve));
      const stop = this.events.listen(currentTenant().tenantId, {
        onEvent: (event) => {
          if (event.type === 'mission.completed' && event.data.missionId === id) wake();
        },
        // The gateway is stopping: the mission is answered as it is.
        onClose: () => {
          settled = true;
          wake();
        },
      });
      try {
        for (;;) {
          const mission = await requestMessage(this.bus, Messages.missionGet, { id });
          const left = deadline - Date.now();
          if (FINAL_MISSION_STATUSES.includes(mission.status) || left <= 0 || settled) return mission;
          let timer: NodeJS.Timeout | undefined;
          await Promise.race([woken, new Promise((resolve) => (timer = setTimeout(resolve, Math.min(WAIT_REREAD_MS, left))))]);
          clearTimeout(timer);
        }
      } finally {
        stop();
      }
    },
  };

  private readonly requestOptions: { readonly [K in OperationName]?: RequestOptions } = { ingestDocument: { timeoutMs: INGEST_TIMEOUT_MS } };

  constructor(
    @Inject(BUS) private readonly bus: MessageBus,
    @Inject(GATEWAY_OPTIONS) private readonly options: GatewayOptions,
    private readonly tenants: TenantRateLimiter,
    private readonly events: TenantEventFeed,
  ) {}

  /** Runs `name` for `caller`; the reply is typed by the operation's reply schema (checked by the service that sent it). */
  async run(name: OperationName, request: OperationRequest, caller: OperationCaller): Promise<unknown> {
    const operation: OperationDefinition = Operations[name];
    const composed = this.compositions[name];
    if (composed) return composed(request);
    const prepare = this.payloads[name] as ((request: OperationRequest, caller: OperationCaller) => Promise<unknown>) | undefined;
    const payload = prepare ? await prepare(request, caller) : this.checkedInput(operation, request);
    return requestMessage(this.bus, operation.message, payload, this.requestOptions[name]);
  }

  /** Serves the operation's REST route: its `:id`, its query or body, its Idempotency-Key; its status and Location. */
  async serveHttp(name: OperationName, request: FastifyRequest, reply: FastifyReply): Promise<unknown> {
    const { http } = Operations[name] as OperationDefinition;
    const auth = request.auth;
    if (!auth) throw new Error(`${http.operationId} ran without its caller: the arrival hook authenticates every route that is not public`);
    const header = request.headers['idempotency-key'];
    const result = await this.run(
      name,
      {
        id: (request.params as { id?: string } | undefined)?.id,
        fields: http.body ? request.body : http.query ? request.query : {},
        ...(http.idempotencyKey && typeof header === 'string' ? { idempotencyKey: header } : {}),
      },
      auth,
    );
    if (http.success.location && typeof result === 'object' && result !== null && 'id' in result) void reply.header('Location', `${http.path}/${String(result.id)}`);
    return http.success.status === 204 ? undefined : result;
  }

  private checkedInput(operation: OperationDefinition, request: OperationRequest): unknown {
    const { schema, label, optional } = fieldsOf(operation);
    const fields: unknown = parseOrThrow(schema, request.fields === undefined && optional ? {} : request.fields, label);
    return operation.http.pathId ? { id: request.id, ...(fields as object) } : fields;
  }

  /**
   * An approval step's assignees must be users of the tenant who may decide approvals
   * (`hits:approve`): an item assigned to anyone else could never be decided. One request to the
   * idp for all the mission's steps; 400 `validation_failed` naming each step and name refused.
   */
  private async checkAssignees(mission: SubmitMissionRequest): Promise<void> {
    const named = (mission.steps ?? []).flatMap((step, index) => (step.type === 'approval' && step.assignees ? step.assignees.map((name) => ({ index, name })) : []));
    if (named.length === 0) return;
    const { unknown, unableToApprove } = await requestMessage(this.bus, Messages.usersUnknown, { tenantId: currentTenant().tenantId, usernames: named.map(({ name }) => name) });
    if (unknown.length === 0 && unableToApprove.length === 0) return;
    const missing = new Set(unknown);
    const unable = new Set(unableToApprove);
    throw new DomainError(
      ErrorCode.ValidationFailed,
      'Mission is invalid',
      named
        .filter(({ name }) => missing.has(name) || unable.has(name))
        .map(({ index, name }) => ({
          field: `steps.${index}.assignees`,
          message: missing.has(name) ? `the tenant has no user "${name}"` : `the user "${name}" may not decide approvals (no hits:approve scope)`,
        })),
    );
  }

  /**
   * Records the decision of the caller (the token's subject, and for a person the user's name,
   * which hit-service checks against the item's assignees); 409 once the item is decided or expired.
   */
  private async decision(request: OperationRequest, caller: OperationCaller, decision: 'approved' | 'rejected'): Promise<PayloadOf<typeof Operations.approveHit.message>> {
    const { comment } = parseOrThrow(REQUEST_SCHEMAS.HitDecision, request.fields ?? {}, 'Decision');
    return {
      id: idOf(request, 'Decision'),
      decision,
      decidedBy: caller.subject,
      ...(caller.username !== undefined ? { username: caller.username } : {}),
      ...(comment !== undefined ? { comment } : {}),
    };
  }
}
