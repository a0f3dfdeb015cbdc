import { z } from 'zod';
import { BrainQuerySchema, IngestDocumentCommandSchema } from './brain';
import { CreateHitSchema, DecideHitSchema, ListPendingHitsSchema } from './hits';
import { ListMissionsQuerySchema, SubmitMissionCommandSchema } from './missions';
import { PageQuerySchema } from './pagination';
import { CreateTenantSchema, CreateUserCommandSchema, TenantSubresourceCommandSchema, UpdateTenantCommandSchema } from './tenants';
import { ListTenantEventsSchema, TenantEventPageSchema } from './tenant-events';
import { CreateWebhookSchema } from './webhooks';
import { EventTypes, Topic, Topics } from './topics';
import { ResourceIdSchema } from './validation';
import { RESPONSE_SCHEMAS } from './views';

/**
 * A request one service answers over the bus: where it goes, what it carries and what comes back.
 * The bus checks the payload against its schema on both sides (the sender's mistakes fail where
 * they are made, a handler never sees an unchecked payload) and the reply against its schema on
 * both sides too. `payloadLabel` names the payload in validation errors ("Tenant is invalid").
 */
export interface MessageDefinition<P extends z.ZodType = z.ZodType, R extends z.ZodType = z.ZodType> {
  readonly topic: Topic;
  readonly type: string;
  readonly payload: P;
  readonly reply: R;
  readonly payloadLabel?: string;
}

/** The payload a sender builds (before defaults and transforms). */
export type PayloadOf<M extends MessageDefinition> = z.input<M['payload']>;
/** The payload a handler receives, checked. */
export type CheckedPayloadOf<M extends MessageDefinition> = z.output<M['payload']>;
/** Arrays and objects at any depth as readonly: what the contracts' view interfaces declare. */
export type DeepReadonly<T> = T extends ReadonlyArray<infer U> ? ReadonlyArray<DeepReadonly<U>> : T extends object ? { readonly [K in keyof T]: DeepReadonly<T[K]> } : T;
/** What a handler answers (its view types are readonly), before its reply schema's defaults and transforms. */
export type ReplyOf<M extends MessageDefinition> = DeepReadonly<z.input<M['reply']>>;
/** What the sender gets back, checked. */
export type CheckedReplyOf<M extends MessageDefinition> = z.output<M['reply']>;

const message = <P extends z.ZodType, R extends z.ZodType>(definition: MessageDefinition<P, R>): MessageDefinition<P, R> => definition;

const NoPayload = z.strictObject({});

/**
 * `brain.document.ingest`: the document with the tenant's quota, or (from a gateway of an earlier
 * version, during a rolling upgrade) the bare document, which brain-service holds to the smallest
 * tier's quota.
 */
const IngestDocumentPayloadSchema = z.union([IngestDocumentCommandSchema, z.record(z.string(), z.unknown())]);

/** What brain-service holds for a tenant: the quantities its storage quota counts. */
export const BrainUsageSchema = z.object({ documents: z.int().min(0), bytes: z.int().min(0) });
/**
 * `identity.users.unknown`: which of `usernames` (lower-case) the tenant has no user of, and which
 * name a user without `hits:approve` (neither could decide an approval assigned to them).
 */
export const UnknownUsersQuerySchema = z.strictObject({ tenantId: z.uuid(), usernames: z.array(z.string().min(1).max(100)).min(1).max(400) });
export const UnknownUsersSchema = z.object({ unknown: z.array(z.string()), unableToApprove: z.array(z.string()).default([]) });

/** The reply to a deletion: the id deleted. */
export const DeletedSchema = z.object({ id: z.string() });

/** Every request of the platform, by the name its message carries. */
export const Messages = {
  tenantCreate: message({
    topic: Topics.identityRequests,
    type: 'identity.tenant.create',
    payload: CreateTenantSchema,
    reply: RESPONSE_SCHEMAS.CreatedTenant,
    payloadLabel: 'Tenant',
  }),
  tenantGet: message({ topic: Topics.identityRequests, type: 'identity.tenant.get', payload: ResourceIdSchema, reply: RESPONSE_SCHEMAS.Tenant }),
  tenantUpdate: message({ topic: Topics.identityRequests, type: 'identity.tenant.update', payload: UpdateTenantCommandSchema, reply: RESPONSE_SCHEMAS.Tenant }),
  clientCreate: message({ topic: Topics.identityRequests, type: 'identity.client.create', payload: TenantSubresourceCommandSchema, reply: RESPONSE_SCHEMAS.ClientCredentials }),
  usersUnknown: message({ topic: Topics.identityRequests, type: 'identity.users.unknown', payload: UnknownUsersQuerySchema, reply: UnknownUsersSchema }),
  userCreate: message({ topic: Topics.identityRequests, type: 'identity.user.create', payload: CreateUserCommandSchema, reply: RESPONSE_SCHEMAS.User, payloadLabel: 'User' }),
  signingKeyRotate: message({ topic: Topics.identityRequests, type: 'identity.signing_key.rotate', payload: NoPayload, reply: RESPONSE_SCHEMAS.SigningKeyRotation }),
  missionSubmit: message({ topic: Topics.missionRequests, type: 'mission.submit', payload: SubmitMissionCommandSchema, reply: RESPONSE_SCHEMAS.Mission }),
  missionGet: message({ topic: Topics.missionRequests, type: 'mission.get', payload: ResourceIdSchema, reply: RESPONSE_SCHEMAS.Mission }),
  missionList: message({ topic: Topics.missionRequests, type: 'mission.list', payload: ListMissionsQuerySchema, reply: RESPONSE_SCHEMAS.MissionPage, payloadLabel: 'Query' }),
  missionCancel: message({ topic: Topics.missionRequests, type: 'mission.cancel', payload: ResourceIdSchema, reply: RESPONSE_SCHEMAS.Mission }),
  brainQuery: message({ topic: Topics.brainRequests, type: 'brain.query', payload: BrainQuerySchema, reply: RESPONSE_SCHEMAS.BrainQueryResult, payloadLabel: 'Query' }),
  brainDocumentIngest: message({ topic: Topics.brainRequests, type: 'brain.document.ingest', payload: IngestDocumentPayloadSchema, reply: RESPONSE_SCHEMAS.IngestedDocument }),
  brainDocumentList: message({
    topic: Topics.brainRequests,
    type: 'brain.document.list',
    payload: PageQuerySchema,
    reply: RESPONSE_SCHEMAS.BrainDocumentPage,
    payloadLabel: 'Query',
  }),
  brainDocumentGet: message({ topic: Topics.brainRequests, type: 'brain.document.get', payload: ResourceIdSchema, reply: RESPONSE_SCHEMAS.BrainDocument }),
  brainDocumentPassages: message({
    topic: Topics.brainRequests,
    type: 'brain.document.passages',
    payload: ResourceIdSchema.extend(PageQuerySchema.shape),
    reply: RESPONSE_SCHEMAS.PassagePage,
    payloadLabel: 'Query',
  }),
  brainDocumentDelete: message({ topic: Topics.brainRequests, type: 'brain.document.delete', payload: ResourceIdSchema, reply: DeletedSchema }),
  brainUsageGet: message({ topic: Topics.brainRequests, type: 'brain.usage.get', payload: NoPayload, reply: BrainUsageSchema }),
  hitCreate: message({ topic: Topics.hitRequests, type: 'hit.create', payload: CreateHitSchema, reply: RESPONSE_SCHEMAS.HitItem }),
  hitGet: message({ topic: Topics.hitRequests, type: 'hit.get', payload: ResourceIdSchema, reply: RESPONSE_SCHEMAS.HitItem }),
  hitListPending: message({ topic: Topics.hitRequests, type: 'hit.list_pending', payload: ListPendingHitsSchema, reply: RESPONSE_SCHEMAS.HitItemPage, payloadLabel: 'Query' }),
  hitDecide: message({ topic: Topics.hitRequests, type: 'hit.decide', payload: DecideHitSchema, reply: RESPONSE_SCHEMAS.HitItem, payloadLabel: 'Decision' }),
  webhookCreate: message({
    topic: Topics.notifyRequests,
    type: 'notify.webhook.create',
    payload: CreateWebhookSchema,
    reply: RESPONSE_SCHEMAS.CreatedWebhook,
    payloadLabel: 'Webhook',
  }),
  webhookList: message({ topic: Topics.notifyRequests, type: 'notify.webhook.list', payload: PageQuerySchema, reply: RESPONSE_SCHEMAS.WebhookPage, payloadLabel: 'Query' }),
  webhookGet: message({ topic: Topics.notifyRequests, type: 'notify.webhook.get', payload: ResourceIdSchema, reply: RESPONSE_SCHEMAS.Webhook }),
  webhookDelete: message({ topic: Topics.notifyRequests, type: 'notify.webhook.delete', payload: ResourceIdSchema, reply: DeletedSchema }),
  webhookDeliveries: message({
    topic: Topics.notifyRequests,
    type: 'notify.webhook.deliveries',
    payload: ResourceIdSchema.extend(PageQuerySchema.shape),
    reply: RESPONSE_SCHEMAS.WebhookDeliveryPage,
    payloadLabel: 'Query',
  }),
  webhookTest: message({ topic: Topics.notifyRequests, type: 'notify.webhook.test', payload: ResourceIdSchema, reply: RESPONSE_SCHEMAS.WebhookDelivery }),
  eventsList: message({ topic: Topics.notifyRequests, type: 'notify.events.list', payload: ListTenantEventsSchema, reply: TenantEventPageSchema, payloadLabel: 'Query' }),
} as const;
export type Messages = typeof Messages;
export type MessageName = keyof Messages;

/** Every message type by name: the requests' (from Messages) and the events'. */
export const MessageTypes = {
  ...EventTypes,
  ...(Object.fromEntries(Object.entries(Messages).map(([name, definition]) => [name, definition.type])) as { readonly [K in MessageName]: string }),
};
