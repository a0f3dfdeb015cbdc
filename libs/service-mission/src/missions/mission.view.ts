import type { MissionStepView, MissionView } from '@mission/contracts';
import { MissionEntity, StoredStep } from './mission.entity';

function stepView(step: StoredStep): MissionStepView {
  return {
    index: step.index,
    type: step.type,
    status: step.status,
    ...(step.output ? { output: step.output } : {}),
    ...(step.hitId ? { hitId: step.hitId } : {}),
  };
}

/** The mission as clients see it (the `Mission` schema of the OpenAPI document): definitions of steps and the raw input stay inside. */
export function missionView(mission: MissionEntity): MissionView {
  return {
    id: mission.id,
    title: mission.title,
    objective: mission.objective,
    status: mission.status,
    metadata: mission.metadata,
    steps: mission.steps.map(stepView),
    ...(mission.result ? { result: mission.result } : {}),
    ...(mission.error ? { error: mission.error } : {}),
    createdAt: mission.createdAt.toISOString(),
    updatedAt: mission.updatedAt.toISOString(),
    ...(mission.completedAt ? { completedAt: mission.completedAt.toISOString() } : {}),
  };
}
