import { z } from 'zod';

export const HIT_STATUSES = ['pending', 'approved', 'rejected', 'cancelled'] as const;
export type HitStatus = (typeof HIT_STATUSES)[number];
export type HitDecision = 'approved' | 'rejected';

export const HIT_COMMENT_MAX = 2_000;

/** Body of `POST /api/hit/:id/approve` and `/reject`. */
export const DecideHitBodySchema = z.strictObject({
  comment: z.string().max(HIT_COMMENT_MAX).optional(),
});

/** Payload of `hit.decide`: the gateway adds the decision and the deciding subject. */
export const DecideHitSchema = z.strictObject({
  id: z.string().min(1).max(200),
  decision: z.enum(['approved', 'rejected']),
  decidedBy: z.string().min(1).max(500),
  comment: z.string().max(HIT_COMMENT_MAX).optional(),
});
export type DecideHitRequest = z.output<typeof DecideHitSchema>;

/** Payload of `hit.create`, sent by mission-service for an approval step. Idempotent per (mission, step). */
export const CreateHitSchema = z.strictObject({
  missionId: z.uuid(),
  stepIndex: z.int().min(0).max(100),
  title: z.string().min(1).max(200),
  description: z.string().max(10_000).optional(),
});
export type CreateHitRequest = z.output<typeof CreateHitSchema>;

export interface HitView {
  readonly id: string;
  readonly missionId: string;
  readonly title: string;
  readonly description?: string;
  readonly status: HitStatus;
  readonly createdAt: string;
  readonly decidedAt?: string;
  readonly decidedBy?: string;
  readonly comment?: string;
}
