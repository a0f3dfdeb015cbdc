import { z } from 'zod';
import { BRAIN_QUERY_MAX_LENGTH } from './brain';
import { AssigneesSchema, ExpiresInSchema, HIT_EXPIRY_OUTCOMES } from './hits';
import { PageQuerySchema } from './pagination';
import { Scopes } from './scopes';
import { jsonByteLength } from './validation';

export const MISSION_STATUSES = ['queued', 'running', 'awaiting_approval', 'succeeded', 'failed', 'rejected', 'cancelled'] as const;
export type MissionStatus = (typeof MISSION_STATUSES)[number];
export const FINAL_MISSION_STATUSES: readonly MissionStatus[] = ['succeeded', 'failed', 'rejected', 'cancelled'];

export const STEP_STATUSES = ['pending', 'running', 'succeeded', 'failed', 'skipped'] as const;
export type StepStatus = (typeof STEP_STATUSES)[number];

export const MISSION_LIMITS = {
  titleLength: 200,
  objectiveLength: 10_000,
  inputBytes: 256 * 1024,
  steps: 20,
  metadataKeys: 50,
  metadataKeyLength: 100,
  metadataValueLength: 2_000,
  stepK: 20,
  defaultStepK: 5,
} as const;

const BrainQueryStepSchema = z.strictObject({
  type: z.literal('brain.query'),
  query: z.string().trim().min(1).max(BRAIN_QUERY_MAX_LENGTH).optional(),
  k: z.int().min(1).max(MISSION_LIMITS.stepK).optional(),
});

const ApprovalStepSchema = z
  .strictObject({
    type: z.literal('approval'),
    title: z.string().trim().min(1).max(200),
    description: z.string().max(10_000).optional(),
    expiresIn: ExpiresInSchema.optional(),
    onExpiry: z.enum(HIT_EXPIRY_OUTCOMES).optional().describe('when the item expires undecided: the mission ends "rejected" (default) or "failed" (approval_expired)'),
    assignees: AssigneesSchema.optional(),
  })
  .refine((step) => step.onExpiry === undefined || step.expiresIn !== undefined, { message: 'onExpiry needs expiresIn', path: ['onExpiry'] });

export const MissionStepSchema = z.discriminatedUnion('type', [BrainQueryStepSchema, ApprovalStepSchema]);
export type MissionStepRequest = z.output<typeof MissionStepSchema>;

export const MetadataSchema = z
  .record(z.string().min(1).max(MISSION_LIMITS.metadataKeyLength), z.string().max(MISSION_LIMITS.metadataValueLength))
  .refine((value) => Object.keys(value).length <= MISSION_LIMITS.metadataKeys, {
    message: `metadata holds at most ${MISSION_LIMITS.metadataKeys} keys`,
  });

export const SubmitMissionSchema = z.strictObject({
  title: z.string().trim().min(1).max(MISSION_LIMITS.titleLength),
  objective: z.string().trim().min(1).max(MISSION_LIMITS.objectiveLength),
  input: z
    .record(z.string(), z.unknown())
    .refine((value) => jsonByteLength(value) <= MISSION_LIMITS.inputBytes, {
      message: `input must be at most ${MISSION_LIMITS.inputBytes} bytes as JSON`,
    })
    .optional(),
  steps: z.array(MissionStepSchema).min(1).max(MISSION_LIMITS.steps).optional(),
  metadata: MetadataSchema.optional(),
});
export type SubmitMissionRequest = z.output<typeof SubmitMissionSchema>;

/**
 * The scopes a mission's steps act with, which its submitter must hold: a `brain.query` step
 * (the default step among them) reads the tenant's Brain, as `GET /api/brain/query` does.
 */
export function scopesMissionNeeds(mission: Pick<SubmitMissionRequest, 'steps'>): string[] {
  const steps = mission.steps ?? [{ type: 'brain.query' as const }];
  return steps.some((step) => step.type === 'brain.query') ? [Scopes.brainRead] : [];
}

export interface MissionError {
  readonly code: string;
  readonly message: string;
}

export interface MissionStepView {
  readonly index: number;
  readonly type: MissionStepRequest['type'];
  readonly status: StepStatus;
  readonly output?: Record<string, unknown>;
  readonly hitId?: string;
}

export interface MissionView {
  readonly id: string;
  readonly title: string;
  readonly objective: string;
  readonly status: MissionStatus;
  readonly metadata: Record<string, string>;
  readonly steps: readonly MissionStepView[];
  readonly result?: Record<string, unknown>;
  readonly error?: MissionError;
  readonly createdAt: string;
  readonly updatedAt: string;
  readonly completedAt?: string;
}

/** `?status=` of `GET /api/missions` (with the page parameters). */
export const MissionStatusFilterSchema = z.enum(MISSION_STATUSES);

/** Query of `GET /api/missions`, and the payload of `mission.list`. */
export const ListMissionsQuerySchema = PageQuerySchema.extend({ status: MissionStatusFilterSchema.optional() });

/** Longest a client may wait for a mission to become final in one request. */
export const MAX_WAIT_SECONDS = 60;

/** `?timeoutSeconds=` of `GET /api/missions/:id/wait` (and `wait_for_mission`): 1–60, default 30. */
export const WaitForMissionQuerySchema = z.strictObject({
  timeoutSeconds: z.coerce.number().int().min(1).max(MAX_WAIT_SECONDS).default(30),
});

/** Payload of `mission.submit`: the validated body and the client's Idempotency-Key, if any. */
export const SubmitMissionCommandSchema = z.strictObject({
  mission: z.unknown(),
  idempotencyKey: z.string().min(1).max(255).optional(),
  /** The submitter's scopes as the gateway verified them: the authority the mission's steps act with. */
  scopes: z.array(z.string().min(1).max(64)).max(32).optional(),
});
export type SubmitMissionCommand = z.output<typeof SubmitMissionCommandSchema>;

/** `Idempotency-Key`: 1–255 visible ASCII characters. */
export const IDEMPOTENCY_KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;
