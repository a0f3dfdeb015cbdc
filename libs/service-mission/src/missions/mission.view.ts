import type { MissionStepView, MissionView } from '@mission/contracts';
import { MissionEntity, StoredStep } from './mission.entity';

/**
 * A step's status as clients see it. A pending step whose request is out while the mission runs is
 * running: the first step's request leaves with the submit, and the runner marks only the mission
 * running when it starts (MissionRunner.markRunning).
 */
function stepStatus(mission: MissionEntity, step: StoredStep): MissionStepView['status'] {
  return step.status === 'pending' && step.requestId !== undefined && mission.status === 'running' ? 'running' : step.status;
}

function stepView(mission: MissionEntity, step: StoredStep): MissionStepView {
  return {
    index: step.index,
    type: step.type,
    status: stepStatus(mission, step),
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
    steps: mission.steps.map((step) => stepView(mission, step)),
    ...(mission.result ? { result: mission.result } : {}),
    ...(mission.error ? { error: mission.error } : {}),
    createdAt: mission.createdAt.toISOString(),
    updatedAt: mission.updatedAt.toISOString(),
    ...(mission.completedAt ? { completedAt: mission.completedAt.toISOString() } : {}),
  };
}
