import { z } from 'zod';
import { PageQuerySchema } from './pagination';
import { UsernameSchema } from './tenants';

export const HIT_STATUSES = ['pending', 'approved', 'rejected', 'cancelled', 'expired'] as const;
export type HitStatus = (typeof HIT_STATUSES)[number];
export type HitDecision = 'approved' | 'rejected';

export const HIT_COMMENT_MAX = 2_000;

export const HIT_LIMITS = {
  /** An approval step's `expiresIn`: one second to 30 days. */
  expiresInMin: 1,
  expiresInMax: 2_592_000,
  assigneesMax: 20,
} as const;

/** What a mission does when its approval item expires undecided: ends `rejected` (default) or `failed`. */
export const HIT_EXPIRY_OUTCOMES = ['reject', 'fail'] as const;
export type HitExpiryOutcome = (typeof HIT_EXPIRY_OUTCOMES)[number];

export const ExpiresInSchema = z
  .int()
  .min(HIT_LIMITS.expiresInMin)
  .max(HIT_LIMITS.expiresInMax)
  .describe('seconds the item waits for a decision, 1 to 2592000 (30 days); undecided by then, it expires');

/** User names of the tenant (as created with POST /admin/tenants/:id/users), compared case-insensitively: stored lower-case, each once. */
export const AssigneesSchema = z
  .array(UsernameSchema.transform((name) => name.toLowerCase()))
  .min(1)
  .max(HIT_LIMITS.assigneesMax)
  .refine((names) => new Set(names).size === names.length, { message: 'must not name a user twice' })
  .describe('the users (usernames) who alone may decide the item; machine clients may not decide it');

/** Body of `POST /api/hit/:id/approve` and `/reject`. */
export const DecideHitBodySchema = z.strictObject({
  comment: z.string().max(HIT_COMMENT_MAX).optional(),
});

/**
 * Payload of `hit.decide`: the gateway adds the decision and the deciding subject, and, for a
 * person's token, the user's name from the token (never from the request).
 */
export const DecideHitSchema = z.strictObject({
  id: z.string().min(1).max(200),
  decision: z.enum(['approved', 'rejected']),
  decidedBy: z.string().min(1).max(500),
  username: z.string().min(1).max(100).optional(),
  comment: z.string().max(HIT_COMMENT_MAX).optional(),
});
export type DecideHitRequest = z.output<typeof DecideHitSchema>;

/** Payload of `hit.create`, sent by mission-service for an approval step. Idempotent per (mission, step). */
export const CreateHitSchema = z.strictObject({
  missionId: z.uuid(),
  stepIndex: z.int().min(0).max(100),
  title: z.string().min(1).max(200),
  description: z.string().max(10_000).optional(),
  expiresIn: ExpiresInSchema.optional(),
  assignees: AssigneesSchema.optional(),
});
export type CreateHitRequest = z.output<typeof CreateHitSchema>;

/** `GET /api/hit`: a page of pending items; `assignedTo=me` keeps those assigned to the calling user. */
export const ListHitsQuerySchema = PageQuerySchema.extend({
  assignedTo: z.literal('me').optional().describe('"me": only the items assigned to the calling user (a person’s token)'),
});

/** Payload of `hit.list_pending`: the gateway turns `assignedTo=me` into the user's name. */
export const ListPendingHitsSchema = PageQuerySchema.extend({
  assignee: z.string().min(1).max(100).optional(),
});
export type ListPendingHitsRequest = z.output<typeof ListPendingHitsSchema>;

export interface HitView {
  readonly id: string;
  readonly missionId: string;
  readonly title: string;
  readonly description?: string;
  readonly status: HitStatus;
  readonly createdAt: string;
  readonly expiresAt?: string;
  readonly assignees?: readonly string[];
  readonly decidedAt?: string;
  readonly decidedBy?: string;
  readonly comment?: string;
}
