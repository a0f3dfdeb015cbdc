import { EntityManager } from 'typeorm';
import { MessageTypes, MissionAwaitingApprovalEvent, MissionCompletedEvent, type MissionError, Topics } from '@mission/contracts';
import { enqueueOutbox } from '@mission/persistence';
import { MISSION_SCHEMA, MissionEntity, StoredStep } from './mission.entity';

/** Enqueues `mission.completed` in the transaction that made the mission final. */
export async function announceCompletion(manager: EntityManager, mission: MissionEntity): Promise<void> {
  const event: MissionCompletedEvent = { missionId: mission.id, status: mission.status, completedAt: (mission.completedAt ?? mission.updatedAt).toISOString() };
  await enqueueOutbox(manager, MISSION_SCHEMA, { topic: Topics.missionEvents, type: MessageTypes.missionCompleted, key: `${mission.tenantId}:${mission.id}`, payload: event });
}

/** Enqueues `mission.awaiting_approval` in the transaction that parked the mission on its approval step. */
export async function announceAwaitingApproval(manager: EntityManager, mission: MissionEntity, step: { readonly index: number; readonly hitId: string }, now: Date): Promise<void> {
  const event: MissionAwaitingApprovalEvent = { missionId: mission.id, hitId: step.hitId, stepIndex: step.index, at: now.toISOString() };
  await enqueueOutbox(manager, MISSION_SCHEMA, {
    topic: Topics.missionEvents,
    type: MessageTypes.missionAwaitingApproval,
    key: `${mission.tenantId}:${mission.id}`,
    payload: event,
  });
}

/**
 * Ends the mission at `step`, which failed: the step has no request outstanding, the steps after
 * it are skipped, and the mission is `rejected`, or `failed` with `error`.
 */
export function endAtFailedStep(
  mission: MissionEntity,
  step: StoredStep,
  now: Date,
  end: { readonly status: 'rejected' } | { readonly status: 'failed'; readonly error: MissionError },
): void {
  step.status = 'failed';
  step.requestId = undefined;
  skipStepsAfter(mission, step.index);
  mission.status = end.status;
  mission.completedAt = now;
  if (end.status === 'failed') mission.error = end.error;
}

/** Marks every step after `index` that has not run as skipped (the mission ended early). */
export function skipStepsAfter(mission: MissionEntity, index: number): void {
  mission.steps.filter((later) => later.index > index && (later.status === 'pending' || later.status === 'running')).forEach((later) => (later.status = 'skipped'));
}
