import { z } from 'zod';
import { TENANT_EVENT_TYPES } from './tenant-events';

/*
 * Webhooks (API contract, "Events: webhooks"): a tenant's subscriptions to its events, delivered
 * as Standard Webhooks (signed, retried on a schedule, the same `webhook-id` on every attempt).
 */

/** The event type of a test delivery (`POST /api/webhooks/:id/test`): never in the log. */
export const WEBHOOK_TEST_EVENT = 'webhook.test';

export const MAX_WEBHOOK_URL_LENGTH = 2_048;
/** Webhooks one tenant may hold. */
export const MAX_WEBHOOKS_PER_TENANT = 50;

export const CreateWebhookSchema = z.strictObject({
  url: z.string().min(1).max(MAX_WEBHOOK_URL_LENGTH).describe('https:// only; never a loopback, private, link-local or metadata address'),
  events: z
    .array(z.enum(TENANT_EVENT_TYPES))
    .min(1)
    .max(TENANT_EVENT_TYPES.length)
    .refine((events) => new Set(events).size === events.length, 'must not repeat a type'),
  description: z.string().max(500).optional(),
});
export type CreateWebhook = z.output<typeof CreateWebhookSchema>;

const uuid = z.uuid();
const timestamp = z.iso.datetime();

export const WebhookViewSchema = z.object({
  id: uuid,
  url: z.string(),
  events: z.array(z.enum(TENANT_EVENT_TYPES)),
  description: z.string().optional(),
  createdAt: timestamp,
});
export type WebhookView = z.output<typeof WebhookViewSchema>;

export const CreatedWebhookViewSchema = WebhookViewSchema.extend({
  secret: z.string().describe('`whsec_` + base64 of 32 random bytes: the signing secret, shown only now'),
});
export type CreatedWebhookView = z.output<typeof CreatedWebhookViewSchema>;

export const WEBHOOK_DELIVERY_STATUSES = ['pending', 'succeeded', 'failed'] as const;

/** One attempt to deliver one event to one webhook. */
export const WebhookDeliveryViewSchema = z.object({
  id: uuid,
  eventId: z.string().describe('the `webhook-id` header: the same on every attempt of one event'),
  eventType: z.string(),
  attempt: z.int().min(1),
  status: z.enum(WEBHOOK_DELIVERY_STATUSES).describe('pending: being sent, or waiting for its next attempt'),
  responseStatus: z.int().optional(),
  error: z.string().optional(),
  createdAt: timestamp,
});
export type WebhookDeliveryView = z.output<typeof WebhookDeliveryViewSchema>;
