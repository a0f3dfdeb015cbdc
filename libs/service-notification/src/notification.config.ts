import { z } from 'zod';
import { ServiceConfigSchema } from '@mission/runtime';
import { DEFAULT_RETRY_SCHEDULE_SECONDS } from './webhooks/dispatcher';

const MAX_RETRY_DELAY_SECONDS = 7 * 24 * 3600;

/** Webhook settings, read by notification-service's own process and by `npm start`. */
export const WebhookSettingsSchema = {
  /** Seconds before each retry of a delivery that got no 2xx within 10 s; after the last, it is `failed`. */
  WEBHOOK_RETRY_SCHEDULE: z
    .string()
    .trim()
    .regex(/^\d+(\s*,\s*\d+)*$/, 'must be whole numbers of seconds separated by commas, e.g. 5,300,1800')
    .transform((value) => value.split(',').map((part) => Number(part.trim())))
    .pipe(z.array(z.int().min(1).max(MAX_RETRY_DELAY_SECONDS)).min(1).max(20))
    .default([...DEFAULT_RETRY_SCHEDULE_SECONDS]),
  /** Local development only: webhooks may use http:// and loopback, private or link-local addresses. */
  WEBHOOKS_ALLOW_PRIVATE: z.stringbool().default(false),
};

/** Environment of notification-service: the common service settings and the webhook settings. */
export const NotificationServiceConfigSchema = ServiceConfigSchema.extend(WebhookSettingsSchema);

export const EmbeddedNotificationConfigSchema = z.object(WebhookSettingsSchema);
