import { randomUUID } from 'node:crypto';
import { EntityManager } from 'typeorm';
import { Messages, MISSION_LIMITS, type PayloadOf, Topics } from '@mission/contracts';
import { Headers, REQUEST_DEADLINE_HEADER } from '@mission/messaging';
import { enqueueOutbox, RecordCipher } from '@mission/persistence';
import { MISSION_SCHEMA, MissionEntity, StoredStep } from './mission.entity';

/** How long a step waits for its reply, and how it retries. */
export interface RunnerTimings {
  /** A step request unanswered this long is sent again (its deadline: a server skips it after). */
  readonly replyTimeoutMs: number;
  /** After a step's dependency answered "unavailable", the first retry waits this long, doubling… */
  readonly retryInitialMs: number;
  /** …up to this long. */
  readonly retryMaxMs: number;
  /**
   * Requests a step sends at most: after that many unanswered or "unavailable" ones, the step
   * fails with the last error (or `dependency_unavailable`) instead of retrying forever.
   */
  readonly maxAttempts: number;
}

/** 10 attempts: about 5 minutes of unanswered requests, or about 3 of an unavailable dependency. */
export const DEFAULT_RUNNER_TIMINGS: RunnerTimings = { replyTimeoutMs: 30_000, retryInitialMs: 1_000, retryMaxMs: 30_000, maxAttempts: 10 };

/**
 * The requests mission steps send (a Brain query, an approval item): each goes into the outbox,
 * sealed (it carries tenant content), with `mission.step-results.v1` as its reply-to and the
 * step's request id as correlation id, in the transaction that assigned it.
 */
export class StepRequests {
  constructor(
    private readonly cipher: RecordCipher,
    private readonly timings: RunnerTimings = DEFAULT_RUNNER_TIMINGS,
  ) {}

  /** Whether the step may send another request. */
  mayRetry(step: StoredStep): boolean {
    return (step.attempts ?? 0) < this.timings.maxAttempts;
  }

  /** Whether the step waits for the reply to a request that is not overdue yet. */
  outstanding(mission: MissionEntity, step: StoredStep, now: Date): boolean {
    return step.requestId !== undefined && mission.nextCheckAt !== null && mission.nextCheckAt.getTime() > now.getTime();
  }

  /** Gives the step a new request id and the mission its reply deadline, then enqueues the request. */
  async send(manager: EntityManager, mission: MissionEntity, step: StoredStep, now: Date): Promise<void> {
    step.requestId = randomUUID();
    step.attempts = (step.attempts ?? 0) + 1;
    const deadline = now.getTime() + this.timings.replyTimeoutMs;
    mission.nextCheckAt = new Date(deadline);
    const request = step.type === 'brain.query' ? brainQueryOf(mission, step) : hitRequestOf(mission, step);
    await enqueueOutbox(
      manager,
      MISSION_SCHEMA,
      {
        ...request,
        key: `${mission.tenantId}:${mission.id}`,
        headers: { [Headers.replyTo]: Topics.missionStepResults, [Headers.correlationId]: step.requestId, [REQUEST_DEADLINE_HEADER]: String(deadline) },
      },
      this.cipher,
    );
  }

  /** The step's dependency was unavailable: its request goes out again after a backoff. */
  retryLater(mission: MissionEntity, step: StoredStep, now: Date): void {
    const backoff = Math.min(this.timings.retryMaxMs, this.timings.retryInitialMs * 2 ** Math.max(0, (step.attempts ?? 1) - 1));
    mission.nextCheckAt = new Date(now.getTime() + backoff);
  }
}

/** A step's request as its message defines it: the message's topic and type, its payload checked before it is stored for sending. */
function stepRequest<M extends (typeof Messages)[keyof typeof Messages]>(message: M, payload: PayloadOf<M>): { topic: M['topic']; type: string; payload: unknown } {
  return { topic: message.topic, type: message.type, payload: message.payload.parse(payload) };
}

function brainQueryOf(mission: MissionEntity, step: Extract<StoredStep, { type: 'brain.query' }>): { topic: string; type: string; payload: unknown } {
  return stepRequest(Messages.brainQuery, { q: step.query ?? mission.objective, k: step.k ?? MISSION_LIMITS.defaultStepK });
}

/** Idempotent per (mission, step): a request sent again gets the same item back. */
function hitRequestOf(mission: MissionEntity, step: Extract<StoredStep, { type: 'approval' }>): { topic: string; type: string; payload: unknown } {
  return stepRequest(Messages.hitCreate, {
    missionId: mission.id,
    stepIndex: step.index,
    title: step.title,
    ...(step.description !== undefined ? { description: step.description } : {}),
    ...(step.expiresIn !== undefined ? { expiresIn: step.expiresIn } : {}),
    ...(step.assignees !== undefined ? { assignees: step.assignees } : {}),
  });
}
