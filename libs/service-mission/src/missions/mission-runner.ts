import { DataSource } from 'typeorm';
import {
  BrainQueryResult,
  DomainError,
  ErrorCode,
  FINAL_MISSION_STATUSES,
  HitDecidedEvent,
  HitView,
  MessageTypes,
  MISSION_LIMITS,
  MissionError,
  MissionQueuedEvent,
  Topics,
} from '@mission/contracts';
import { IncomingMessage, MessageBus } from '@mission/messaging';
import { markProcessed, tenantTransaction } from '@mission/persistence';
import { currentTenant, runWithTenant } from '@mission/tenant-context';
import { MISSION_SCHEMA, MissionEntity, StoredStep } from './mission.entity';
import { announceCompletion, skipStepsAfter } from './mission.lifecycle';
import { MissionsRepository } from './missions.repository';

const HIT_DECISIONS_CONSUMER = 'mission-hit-decisions';

export interface RunnerLogger {
  info(message: string, context?: Record<string, unknown>): void;
  error(message: string, context?: Record<string, unknown>): void;
}

type StepOutcome =
  | { readonly kind: 'succeeded'; readonly output: Record<string, unknown> }
  | { readonly kind: 'failed'; readonly error: MissionError }
  | { readonly kind: 'waiting'; readonly hitId: string };

/**
 * Executes missions step by step. Progress is saved after every step, so a redelivered event or
 * a restart resumes where the mission was; a step is only recorded while the mission still runs.
 * An approval step parks the mission (`awaiting_approval`) until hit-service's `hit.decided`.
 */
export class MissionRunner {
  constructor(
    private readonly dataSource: DataSource,
    private readonly missions: MissionsRepository,
    private readonly bus: MessageBus,
    private readonly logger: RunnerLogger,
    private readonly afterCommit: () => void,
  ) {}

  /** Bus entry point for `mission.events.v1`. */
  async onMissionEvent(message: IncomingMessage): Promise<void> {
    if (message.type !== MessageTypes.missionQueued) return;
    await this.run((message.payload as MissionQueuedEvent).missionId);
  }

  /** Bus entry point for `hit.events.v1`: records the decision once, then resumes or ends the mission. */
  async onHitEvent(message: IncomingMessage): Promise<void> {
    if (message.type !== MessageTypes.hitDecided) return;
    const decision = message.payload as HitDecidedEvent;
    const { tenantId } = currentTenant();
    const resumed = await tenantTransaction(this.dataSource, async (manager) => {
      if (!(await markProcessed(manager, MISSION_SCHEMA, HIT_DECISIONS_CONSUMER, message.id))) return false;
      const mission = await this.missions.lockForTenant(manager, tenantId, decision.missionId);
      const step = mission?.steps[decision.stepIndex];
      if (!mission || mission.status !== 'awaiting_approval' || !step || step.hitId !== decision.hitId || step.status !== 'running') return false;
      step.output = {
        hitId: decision.hitId,
        decision: decision.decision,
        decidedBy: decision.decidedBy,
        ...(decision.comment !== undefined ? { comment: decision.comment } : {}),
      };
      const now = new Date();
      mission.updatedAt = now;
      if (decision.decision === 'approved') {
        step.status = 'succeeded';
        mission.status = 'running';
      } else {
        step.status = 'failed';
        skipStepsAfter(mission, step.index);
        mission.status = 'rejected';
        mission.completedAt = now;
        await announceCompletion(manager, mission);
      }
      await this.missions.save(manager, mission);
      return decision.decision === 'approved';
    });
    this.afterCommit();
    if (resumed) await this.run(decision.missionId);
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
    while (mission && mission.status === 'running') {
      const step = mission.steps.find((candidate) => candidate.status === 'pending' || candidate.status === 'running');
      if (!step) {
        await this.transition(missionId, (current) => {
          if (current.status !== 'running') return false;
          current.status = 'succeeded';
          current.completedAt = new Date();
          current.result = { steps: current.steps.map((done) => done.output ?? null) };
          return true;
        });
        return;
      }
      const outcome = await this.execute(mission, step);
      mission = await this.transition(missionId, (current) => {
        const stored = current.steps[step.index];
        if (current.status !== 'running' || !stored || (stored.status !== 'pending' && stored.status !== 'running')) return false;
        switch (outcome.kind) {
          case 'succeeded':
            stored.status = 'succeeded';
            stored.output = outcome.output;
            break;
          case 'waiting':
            stored.status = 'running';
            stored.hitId = outcome.hitId;
            current.status = 'awaiting_approval';
            break;
          case 'failed':
            stored.status = 'failed';
            skipStepsAfter(current, step.index);
            current.status = 'failed';
            current.completedAt = new Date();
            current.error = outcome.error;
            break;
        }
        return true;
      });
    }
  }

  private async execute(mission: MissionEntity, step: StoredStep): Promise<StepOutcome> {
    const key = `${mission.tenantId}:${mission.id}`;
    try {
      switch (step.type) {
        case 'brain.query': {
          const answer = await this.bus.request<BrainQueryResult>(
            Topics.brainRequests,
            MessageTypes.brainQuery,
            { q: step.query ?? mission.objective, k: step.k ?? MISSION_LIMITS.defaultStepK },
            { key },
          );
          return { kind: 'succeeded', output: { results: answer.results } };
        }
        case 'approval': {
          // Idempotent per (mission, step): a retry after a crash gets the same item back.
          const hit = await this.bus.request<HitView>(
            Topics.hitRequests,
            MessageTypes.hitCreate,
            { missionId: mission.id, stepIndex: step.index, title: step.title, ...(step.description !== undefined ? { description: step.description } : {}) },
            { key },
          );
          return { kind: 'waiting', hitId: hit.id };
        }
      }
    } catch (error) {
      // An unavailable dependency is retried by redelivery or on restart; a refused request fails the step.
      if (error instanceof DomainError && error.code !== ErrorCode.DependencyUnavailable && error.code !== ErrorCode.Internal) {
        return { kind: 'failed', error: { code: error.code, message: error.message } };
      }
      throw error;
    }
  }

  /**
   * Locks the mission, applies `change` if it accepts, saves; returns the mission if changed. A
   * change that makes the mission final announces it (`mission.completed`) in the same transaction.
   */
  private async transition(missionId: string, change: (mission: MissionEntity) => boolean): Promise<MissionEntity | null> {
    const { tenantId } = currentTenant();
    const changed = await tenantTransaction(this.dataSource, async (manager) => {
      const mission = await this.missions.lockForTenant(manager, tenantId, missionId);
      if (!mission || !change(mission)) return null;
      mission.updatedAt = new Date();
      await this.missions.save(manager, mission);
      if (FINAL_MISSION_STATUSES.includes(mission.status)) await announceCompletion(manager, mission);
      return mission;
    });
    if (changed && FINAL_MISSION_STATUSES.includes(changed.status)) this.afterCommit();
    return changed;
  }
}
