import { DataSource } from 'typeorm';
import {
  BrainQueryResult,
  DomainError,
  ErrorCode,
  FINAL_MISSION_STATUSES,
  MessageTypes,
  MISSION_LIMITS,
  MissionError,
  MissionQueuedEvent,
  Topics,
} from '@mission/contracts';
import { IncomingMessage, MessageBus } from '@mission/messaging';
import { tenantTransaction } from '@mission/persistence';
import { currentTenant, runWithTenant } from '@mission/tenant-context';
import { MissionEntity, StoredStep } from './mission.entity';
import { MissionsRepository } from './missions.repository';

export interface RunnerLogger {
  info(message: string, context?: Record<string, unknown>): void;
  error(message: string, context?: Record<string, unknown>): void;
}

type StepOutcome = { readonly ok: true; readonly output: Record<string, unknown> } | { readonly ok: false; readonly error: MissionError };

/**
 * Executes missions step by step. Progress is saved after every step, so a redelivered event or
 * a restart resumes where the mission was; a step is only recorded while the mission still runs.
 */
export class MissionRunner {
  constructor(
    private readonly dataSource: DataSource,
    private readonly missions: MissionsRepository,
    private readonly bus: MessageBus,
    private readonly logger: RunnerLogger,
  ) {}

  /** Bus entry point for `mission.events.v1`. */
  async onEvent(message: IncomingMessage): Promise<void> {
    if (message.type !== MessageTypes.missionQueued) return;
    const { missionId } = message.payload as MissionQueuedEvent;
    await this.run(missionId);
  }

  /** Picks up every mission left queued or running, e.g. after a crash. */
  async resumeUnfinished(batch = 100): Promise<number> {
    const unfinished = await this.missions.findUnfinished(batch);
    for (const { id, tenantId } of unfinished) {
      await runWithTenant({ tenantId }, () => this.run(id)).catch((error: unknown) =>
        this.logger.error('Resuming a mission failed; it stays unfinished', { missionId: id, error: String(error) }),
      );
    }
    return unfinished.length;
  }

  async run(missionId: string): Promise<void> {
    let mission = await this.transition(missionId, (current) => {
      if (current.status !== 'queued' && current.status !== 'running') return false;
      current.status = 'running';
      return true;
    });
    while (mission) {
      const step = mission.steps.find((candidate) => candidate.status === 'pending' || candidate.status === 'running');
      if (!step) {
        await this.finish(missionId);
        return;
      }
      const outcome = await this.execute(mission, step);
      mission = await this.transition(missionId, (current) => {
        const stored = current.steps[step.index];
        if (current.status !== 'running' || !stored || stored.status === 'succeeded' || stored.status === 'failed') return false;
        if (outcome.ok) {
          stored.status = 'succeeded';
          stored.output = outcome.output;
        } else {
          stored.status = 'failed';
          current.steps.filter((later) => later.index > step.index).forEach((later) => (later.status = 'skipped'));
          this.complete(current, 'failed');
          current.error = outcome.error;
        }
        return true;
      });
      if (mission && FINAL_MISSION_STATUSES.includes(mission.status)) return;
    }
  }

  private async execute(mission: MissionEntity, step: StoredStep): Promise<StepOutcome> {
    switch (step.type) {
      case 'brain.query':
        try {
          const answer = await this.bus.request<BrainQueryResult>(
            Topics.brainRequests,
            MessageTypes.brainQuery,
            { q: step.query ?? mission.objective, k: step.k ?? MISSION_LIMITS.defaultStepK },
            { key: `${mission.tenantId}:${mission.id}` },
          );
          return { ok: true, output: { results: answer.results } };
        } catch (error) {
          // An unavailable dependency is retried by redelivery; a refused query fails the step.
          if (error instanceof DomainError && error.code !== ErrorCode.DependencyUnavailable && error.code !== ErrorCode.Internal) {
            return { ok: false, error: { code: error.code, message: error.message } };
          }
          throw error;
        }
      case 'approval':
        return { ok: false, error: { code: 'step_not_supported', message: 'Approval steps are not available yet' } };
    }
  }

  private async finish(missionId: string): Promise<void> {
    await this.transition(missionId, (current) => {
      if (current.status !== 'running') return false;
      this.complete(current, 'succeeded');
      current.result = { steps: current.steps.map((step) => step.output ?? null) };
      return true;
    });
  }

  private complete(mission: MissionEntity, status: 'succeeded' | 'failed'): void {
    mission.status = status;
    mission.completedAt = new Date();
  }

  /** Locks the mission, applies `change` if it accepts, saves; returns the mission if changed. */
  private transition(missionId: string, change: (mission: MissionEntity) => boolean): Promise<MissionEntity | null> {
    const { tenantId } = currentTenant();
    return tenantTransaction(this.dataSource, async (manager) => {
      const mission = await this.missions.lockForTenant(manager, tenantId, missionId);
      if (!mission || !change(mission)) return null;
      mission.updatedAt = new Date();
      await this.missions.save(manager, mission);
      return mission;
    });
  }
}
