import { z } from 'zod';
import { BrainDocumentView, BrainQueryResult, IngestedDocumentView, PassageView } from './brain';
import { ErrorCode } from './errors';
import { HIT_STATUSES, HitView } from './hits';
import { MISSION_STATUSES, MissionView, STEP_STATUSES } from './missions';
import { TENANT_SCOPES } from './scopes';
import { CreatedWebhookViewSchema, WebhookDeliveryViewSchema, WebhookViewSchema } from './webhooks';
import { ClientCredentialsView, CreatedTenantView, SigningKeyRotationView, TenantUsageView, TenantView, TIERS, UserView } from './tenants';

/*
 * The bodies operations answer with. The view types are TypeScript interfaces; their schemas are
 * written here, and the compiler checks that each describes exactly its interface, so neither can
 * change without the other. The bus checks replies against them and the OpenAPI document and the
 * MCP tools' output schemas are generated from them.
 */

const timestamp = z.iso.datetime({ offset: true }).describe('RFC 3339, UTC');
const uuid = z.uuid();
const stringMap = z.record(z.string(), z.string());

const MissionStepViewSchema = z.object({
  index: z.int().min(0),
  type: z.enum(['brain.query', 'approval']),
  status: z.enum(STEP_STATUSES),
  output: z
    .record(z.string(), z.unknown())
    .optional()
    .describe('brain.query: { results }; approval: { hitId, decision ("approved", "rejected" or "expired"), decidedBy?, comment? }'),
  hitId: uuid.optional().describe('the HIT item of an approval step, once created'),
});

const MissionViewSchema = z.object({
  id: uuid,
  title: z.string(),
  objective: z.string(),
  status: z.enum(MISSION_STATUSES),
  metadata: stringMap,
  steps: z.array(MissionStepViewSchema),
  result: z.record(z.string(), z.unknown()).optional().describe('present when succeeded: { steps: [<outputs in order>] }'),
  error: z.object({ code: z.string(), message: z.string() }).optional().describe('present when failed'),
  createdAt: timestamp,
  updatedAt: timestamp,
  completedAt: timestamp.optional(),
});

const HitViewSchema = z.object({
  id: uuid,
  missionId: uuid,
  title: z.string(),
  description: z.string().optional(),
  status: z.enum(HIT_STATUSES),
  createdAt: timestamp,
  expiresAt: timestamp.optional().describe('when the item expires if still undecided (its step’s expiresIn)'),
  assignees: z.array(z.string()).optional().describe('the only users who may decide it (usernames)'),
  decidedAt: timestamp.optional(),
  decidedBy: z.string().optional().describe('the deciding token’s subject'),
  comment: z.string().optional(),
});

const IngestedDocumentViewSchema = z.object({ id: uuid, title: z.string(), chunkCount: z.int().min(1), createdAt: timestamp });

const BrainDocumentViewSchema = IngestedDocumentViewSchema.extend({
  source: z.string().optional(),
  metadata: stringMap,
  contentBytes: z.int().min(1).describe('UTF-8 bytes of the content as ingested'),
});

const BrainQueryResultSchema = z.object({
  query: z.string(),
  results: z.array(
    z.object({ documentId: uuid, chunkId: uuid, title: z.string(), text: z.string(), score: z.number().describe('BM25; higher is better'), source: z.string().optional() }),
  ),
});

const StorageQuotaViewSchema = z.object({ documents: z.int().min(0).describe('documents in the Brain'), bytes: z.int().min(0).describe('bytes of their content (UTF-8)') });
const TenantViewSchema = z.object({
  id: uuid,
  name: z.string(),
  tier: z.enum(TIERS),
  rpm: z.int().min(1).describe('requests per minute'),
  storage: StorageQuotaViewSchema.describe('what the tenant may store in the Brain'),
  createdAt: timestamp,
});
const UsageSchema = z.object({ used: z.int().min(0), limit: z.int().min(0) });
const TenantUsageViewSchema = z.object({ tenantId: uuid, documents: UsageSchema, bytes: UsageSchema });

const ClientCredentialsViewSchema = z.object({
  clientId: z.string(),
  clientSecret: z.string().describe('shown once'),
  scopes: z.array(z.enum(TENANT_SCOPES)),
  redirectUris: z.array(z.string()).optional(),
});

const CreatedTenantViewSchema = TenantViewSchema.extend({ client: ClientCredentialsViewSchema });

const UserViewSchema = z.object({ id: uuid, tenantId: uuid, username: z.string(), scopes: z.array(z.enum(TENANT_SCOPES)), createdAt: timestamp });

const SigningKeyRotationViewSchema = z.object({ kid: z.string(), state: z.literal('published'), activatesAt: timestamp });

export const page = <T extends z.ZodType>(item: T) =>
  z.object({ items: z.array(item), nextCursor: z.string().nullable().describe('pass as `cursor` for the next page; null on the last') });

export const ProblemSchema = z
  .object({
    type: z.url(),
    title: z.string(),
    status: z.int().min(400).max(599),
    detail: z.string(),
    instance: z.string(),
    code: z.enum(Object.values(ErrorCode) as [ErrorCode, ...ErrorCode[]]),
    requestId: z.string().describe('as in the X-Request-Id header'),
    errors: z
      .array(z.object({ field: z.string(), message: z.string() }))
      .optional()
      .describe('one per invalid field (400)'),
  })
  .describe('RFC 9457 problem details');

// Each response schema describes exactly its interface (both directions of assignability, the
// interfaces' readonly modifiers aside).
type Writable<T> = T extends ReadonlyArray<infer U> ? Array<Writable<U>> : T extends object ? { -readonly [K in keyof T]: Writable<T[K]> } : T;
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
/** Optional properties make `{ a; b? }` and `{ a }` assignable both ways: the keys are compared too. */
type Exact<A, B> = Same<A, B> extends true ? Same<keyof A, keyof B> : false;
const described = <S extends z.ZodType, T>(schema: S, exact: Exact<z.output<S>, Writable<T>>): S => (exact ? schema : schema);
const PassageViewSchema = z.object({ chunkId: uuid, ordinal: z.int().min(0).describe('0 for the first passage'), text: z.string() });
const PassageViewChecked = described<typeof PassageViewSchema, PassageView>(PassageViewSchema, true);

/** The response bodies, by the name the OpenAPI document gives them (its components). */
export const RESPONSE_SCHEMAS = {
  Mission: described<typeof MissionViewSchema, MissionView>(MissionViewSchema, true),
  HitItem: described<typeof HitViewSchema, HitView>(HitViewSchema, true),
  IngestedDocument: described<typeof IngestedDocumentViewSchema, IngestedDocumentView>(IngestedDocumentViewSchema, true),
  BrainDocument: described<typeof BrainDocumentViewSchema, BrainDocumentView>(BrainDocumentViewSchema, true),
  BrainQueryResult: described<typeof BrainQueryResultSchema, BrainQueryResult>(BrainQueryResultSchema, true),
  Tenant: described<typeof TenantViewSchema, TenantView>(TenantViewSchema, true),
  CreatedTenant: described<typeof CreatedTenantViewSchema, CreatedTenantView>(CreatedTenantViewSchema, true),
  TenantUsage: described<typeof TenantUsageViewSchema, TenantUsageView>(TenantUsageViewSchema, true),
  ClientCredentials: described<typeof ClientCredentialsViewSchema, ClientCredentialsView>(ClientCredentialsViewSchema, true),
  User: described<typeof UserViewSchema, UserView>(UserViewSchema, true),
  SigningKeyRotation: described<typeof SigningKeyRotationViewSchema, SigningKeyRotationView>(SigningKeyRotationViewSchema, true),
  MissionPage: page(MissionViewSchema),
  HitItemPage: page(HitViewSchema),
  BrainDocumentPage: page(BrainDocumentViewSchema),
  PassagePage: page(PassageViewChecked),
  Webhook: WebhookViewSchema,
  CreatedWebhook: CreatedWebhookViewSchema,
  WebhookPage: page(WebhookViewSchema),
  WebhookDelivery: WebhookDeliveryViewSchema,
  WebhookDeliveryPage: page(WebhookDeliveryViewSchema),
  Problem: ProblemSchema,
} as const;
