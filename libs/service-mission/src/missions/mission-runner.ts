import { DataSource, EntityManager } from 'typeorm';
import { ErrorCode, Scopes, FINAL_MISSION_STATUSES, HitDecidedEvent, HitExpiredEvent, StepResultSchema } from '@mission/contracts';
import { z } from 'zod';
import { Headers, IncomingMessage } from '@mission/messaging';
import { markProcessed, sqlStateOf, tenantTransaction } from '@mission/persistence';
import { currentTenant, runWithTenant } from '@mission/tenant-context';
import { MISSION_SCHEMA, MissionEntity, StoredStep } from './mission.entity';
import { StepRequests } from './mission.steps';
import { announceAwaitingApproval, announceCompletion, endAtFailedStep } from './mission.lifecycle';
import { isStaleVersion, MissionsRepository } from './missions.repository';

const HIT_DECISIONS_CONSUMER = 'mission-hit-decisions';

export interface RunnerLogger {
  info(message: string, context?: Record<string, unknown>): void;
  warn?(message: string, context?: Record<string, unknown>): void;
  error(message: string, context?: Record<string, unknown>): void;
}

export { DEFAULT_RUNNER_TIMINGS, type RunnerTimings } from './mission.steps';

/*
 * What a step keeps of its reply (hit.create's item id, brain.query's passages), checked as shapes:
 * the replies were checked in full by the services that sent them, and an older runner must not
 * refuse a newer service's reply for a field or a value it does not know yet.
 */
const CreatedHitReplySchema = z.object({ id: z.string().min(1) });
const BrainResultsReplySchema = z.object({ results: z.array(z.record(z.string(), z.unknown())) });

/**
 * The approval step an item's outcome (decided, expired) settles, if the mission waits for it.
 * Only the item the mission waits for counts: a cancelled or finished mission stays as it is. The
 * outcome may come before the reply that created the item (that reply lost and sent again, while
 * a person decided the item already shown): the step's request is then still outstanding, and the
 * outcome settles the step; the late reply finds it done and is ignored.
 */
function approvalWaitingFor(mission: MissionEntity, outcome: { readonly hitId: string; readonly stepIndex: number }): Extract<StoredStep, { type: 'approval' }> | undefined {
  const step = mission.steps[outcome.stepIndex];
  const waiting = mission.status === 'awaiting_approval' && step?.hitId === outcome.hitId;
  const beforeItsReply = (mission.status === 'running' || mission.status === 'queued') && step?.hitId === undefined && step?.requestId !== undefined;
  if (!step || step.type !== 'approval' || step.status !== 'running' || !(waiting || beforeItsReply)) return undefined;
  return step;
}

/** The codes of a step reply that say "try again later" rather than "this step failed". */
const TRANSIENT_CODES: ReadonlySet<string> = new Set([ErrorCode.DependencyUnavailable, ErrorCode.Internal]);

/**
 * Executes missions step by step without ever waiting for another service inside a handler.
 *
 * A step's request (a Brain query, an approval item) is written to the outbox in the transaction
 * that marks the step running, with `mission.step-results.v1` as its reply-to; the reply arrives
 * there as an event, keyed by mission, and the transaction that records it also sends the next
 * step's request or ends the mission. A crash at any point is recovered by redelivery: the
 * request is in the outbox or on the bus, the reply on the bus; a reply that never comes (a
 * server crashed after handling) is covered by `next_check_at`, when the request is sent again
 * under a new id, so a stale reply is recognised and ignored. An approval step parks the mission
 * (`awaiting_approval`) until hit-service's `hit.decided`.
 */
export class MissionRunner {
  constructor(
    private readonly dataSource: DataSource,
    private readonly missions: MissionsRepository,
    private readonly steps: StepRequests,
    private readonly logger: RunnerLogger,
    private readonly afterCommit: () => void,
  ) {}

  /** Bus entry point for `mission.step-results.v1`: a reply to a step's request. */
  async onStepResult(message: IncomingMessage): Promise<void> {
    if (message.type !== 'reply') return;
    const requestId = message.headers[Headers.correlationId];
    const missionId = message.key.slice(message.key.indexOf(':') + 1);
    if (!requestId || !message.key.startsWith(`${currentTenant().tenantId}:`)) {
      this.logger.error('Step result without a request id or for another tenant; ignored', { key: message.key });
      return;
    }
    const result = StepResultSchema.safeParse(message.payload);
    await this.transition(missionId, { fromKnownVersion: true }, async (manager, mission, now) => {
      const step = mission.steps.find((candidate) => candidate.requestId === requestId);
      // A reply to a request sent again since, to a cancelled mission, or delivered twice: stale.
      // (A mission still `queued` may have its first step's reply before mission.queued is read:
      // the submit sent that request.)
      if ((mission.status !== 'running' && mission.status !== 'queued') || !step || (step.status !== 'running' && step.status !== 'pending')) return false;
      mission.status = 'running';
      step.status = 'running';
      if (!result.success) {
        this.logger.error('Unreadable step result; the step is retried', { missionId, step: step.index });
        this.steps.retryLater(mission, step, now);
        return true;
      }
      const reply = result.data;
      if (!reply.ok) {
        if (TRANSIENT_CODES.has(reply.error.code) && this.steps.mayRetry(step)) {
          this.logger.warn?.('A step could not reach its dependency; retrying later', { missionId, step: step.index, code: reply.error.code });
          this.steps.retryLater(mission, step, now);
          return true;
        }
        endAtFailedStep(mission, step, now, { status: 'failed', error: { code: reply.error.code, message: reply.error.message } });
        return true;
      }
      // The reply's body is what the step's request answers; only what the step keeps is checked.
      const answer = (step.type === 'approval' ? CreatedHitReplySchema : BrainResultsReplySchema).safeParse(reply.data);
      if (!answer.success) {
        this.logger.error('Step result without what its step keeps; the step is retried', { missionId, step: step.index });
        this.steps.retryLater(mission, step, now);
        return true;
      }
      step.requestId = undefined;
      if ('id' in answer.data) {
        step.hitId = answer.data.id;
        mission.status = 'awaiting_approval';
        await announceAwaitingApproval(manager, mission, { index: step.index, hitId: answer.data.id }, now);
        return true;
      }
      step.status = 'succeeded';
      step.output = { results: answer.data.results };
      await this.proceed(manager, mission, now);
      return true;
    });
  }

  /** `hit.decided` of message `messageId`: records the decision once, then resumes or ends the mission. */
  async onHitDecided(decision: HitDecidedEvent, messageId: string): Promise<void> {
    const output = {
      hitId: decision.hitId,
      decision: decision.decision,
      decidedBy: decision.decidedBy,
      ...(decision.comment !== undefined ? { comment: decision.comment } : {}),
    };
    await this.settleApproval(decision, messageId, output, async (manager, mission, step, now) => {
      if (decision.decision === 'approved') {
        step.status = 'succeeded';
        mission.status = 'running';
        await this.proceed(manager, mission, now);
      } else {
        endAtFailedStep(mission, step, now, { status: 'rejected' });
      }
    });
  }

  /**
   * `hit.expired` of message `messageId`: the approval step's item passed its deadline undecided.
   * The step fails with `decision: "expired"`, and the mission ends as the step's `onExpiry`
   * says: `rejected` (the default), or `failed` with `approval_expired`. Once per message.
   */
  async onHitExpired(expiry: HitExpiredEvent, messageId: string): Promise<void> {
    await this.settleApproval(expiry, messageId, { hitId: expiry.hitId, decision: 'expired' }, async (_manager, mission, step, now) => {
      endAtFailedStep(
        mission,
        step,
        now,
        step.onExpiry === 'fail'
          ? { status: 'failed', error: { code: ErrorCode.ApprovalExpired, message: `The approval "${step.title}" was not decided before its deadline` } }
          : { status: 'rejected' },
      );
    });
  }

  /**
   * An approval item's outcome (message `messageId`), once: when the mission waits for that item,
   * the step records it as its output and `finish` resumes or ends the mission.
   */
  private async settleApproval(
    outcome: { readonly missionId: string; readonly hitId: string; readonly stepIndex: number },
    messageId: string,
    output: Record<string, unknown>,
    finish: (manager: EntityManager, mission: MissionEntity, step: Extract<StoredStep, { type: 'approval' }>, now: Date) => Promise<void>,
  ): Promise<void> {
    // On the locked row only: markProcessed locks its message's row before the mission's would be
    // (a known version's save goes with the commit), the reverse of the locked path's order, so
    // the same decision handled by two replicas at once could deadlock.
    await this.transition(outcome.missionId, { fromKnownVersion: false }, async (manager, mission, now) => {
      if (!(await markProcessed(manager, MISSION_SCHEMA, HIT_DECISIONS_CONSUMER, messageId))) return false;
      const step = approvalWaitingFor(mission, outcome);
      if (!step) return false;
      step.hitId = outcome.hitId;
      step.requestId = undefined;
      step.output = output;
      await finish(manager, mission, step, now);
      return true;
    });
  }

  /** Picks up every mission left queued or running, e.g. after a crash. */
  async resumeUnfinished(batch = 100): Promise<number> {
    return this.resumeEach(await this.missions.findUnfinished(batch), 'Resuming a mission failed; it stays unfinished');
  }

  /** Looks again at queued or running missions whose step reply is overdue: sends their requests again. */
  async checkDue(batch = 100): Promise<number> {
    return this.resumeEach(await this.missions.findDue(batch), 'Checking an overdue mission failed; it is checked again later');
  }

  /**
   * `mission.queued` of a mission whose first step's request left with the submit: the mission is
   * running from here on, if it is still queued (not cancelled, not already moved on by that step's
   * reply). One statement, nothing opened or sealed: the step keeps its stored status (`pending`,
   * its request out), which the view shows as running while the mission runs. A request lost on
   * the way is sent again when the mission's `next_check_at` passes, as for any step.
   */
  async markRunning(missionId: string): Promise<void> {
    const { tenantId } = currentTenant();
    await tenantTransaction(this.dataSource, (manager) => this.missions.markRunning(manager, tenantId, missionId, new Date()));
  }

  /** Starts or continues a mission: sends its current step's request if none is outstanding, or ends it. */
  async advance(missionId: string): Promise<void> {
    await this.transition(missionId, { fromKnownVersion: true }, async (manager, mission, now) => {
      const starting = mission.status === 'queued';
      if (!starting && mission.status !== 'running') return false;
      mission.status = 'running';
      return (await this.proceed(manager, mission, now)) || starting;
    });
  }

  private async resumeEach(missions: ReadonlyArray<{ id: string; tenantId: string }>, failure: string): Promise<number> {
    for (const { id, tenantId } of missions) {
      await runWithTenant({ tenantId }, () => this.advance(id)).catch((error: unknown) => this.logger.error(failure, { missionId: id, error: String(error) }));
    }
    return missions.length;
  }

  /**
   * Moves a running mission on: its next step's request goes into the outbox (unless one is
   * outstanding and not yet overdue), or, with no step left, the mission succeeds. Returns
   * whether the mission changed.
   */
  private async proceed(manager: EntityManager, mission: MissionEntity, now: Date): Promise<boolean> {
    const step = mission.steps.find((candidate) => candidate.status === 'pending' || candidate.status === 'running');
    if (!step) {
      mission.status = 'succeeded';
      mission.completedAt = now;
      mission.result = { steps: mission.steps.map((done) => done.output ?? null) };
      return true;
    }
    if (this.steps.outstanding(mission, step, now)) {
      // The submit sent the first step's request already: the step is running from here on.
      if (step.status === 'running') return false;
      step.status = 'running';
      return true;
    }
    const missing = step.type === 'brain.query' && Array.isArray(mission.grantedScopes) && !mission.grantedScopes.includes(Scopes.brainRead);
    if (missing) {
      // Submitted by a caller without the scope (checked at submit too): the step does not run.
      endAtFailedStep(mission, step, now, {
        status: 'failed',
        error: { code: ErrorCode.InsufficientScope, message: `This step needs the scope ${Scopes.brainRead}, which the mission's submitter did not hold` },
      });
      return true;
    }
    if (!this.steps.mayRetry(step)) {
      endAtFailedStep(mission, step, now, {
        status: 'failed',
        error: { code: ErrorCode.DependencyUnavailable, message: `No answer to this step after ${step.attempts ?? 0} attempts` },
      });
      return true;
    }
    step.status = 'running';
    await this.steps.send(manager, mission, step, now);
    return true;
  }

  /**
   * Lets `change` work on the mission (and write outbox rows), saves it if changed. A change that
   * makes the mission final announces it (`mission.completed`) in the same transaction.
   *
   * `fromKnownVersion` (for changes that write only with the commit: their statements take no
   * lock before the mission's): from the version of the mission this process wrote or read last
   * (MissionsRepository's known versions), when it has one, the change is worked out and saved
   * only if the row still holds it, all in one round trip (the save goes with the commit). When
   * another writer changed the mission meanwhile, the save fails the transaction (nothing of it
   * stays, outbox rows included), and so does a change that finds nothing to do, since the row may
   * say otherwise: either way the change is worked out again on the locked row, as without a
   * known version. So is one PostgreSQL aborted to break a deadlock or a serialization failure:
   * it too left nothing behind.
   */
  private async transition(
    missionId: string,
    options: { readonly fromKnownVersion: boolean },
    change: (manager: EntityManager, mission: MissionEntity, now: Date) => Promise<boolean>,
  ): Promise<void> {
    const { tenantId } = currentTenant();
    const version = options.fromKnownVersion ? this.missions.knownVersion(tenantId, missionId) : undefined;
    if (version) {
      const applied = await tenantTransaction(this.dataSource, async (manager) => {
        const mission = await this.missions.openVersion(manager, version);
        const now = new Date();
        if (!(await change(manager, mission, now))) throw NOTHING_TO_DO;
        await this.finish(manager, mission, now, (saved) => this.missions.saveIfUnchanged(manager, saved, version));
        return true;
      }).catch((error: unknown) => {
        if (error === NOTHING_TO_DO || isStaleVersion(error) || isRetryableConflict(error)) return false;
        throw error;
      });
      if (applied) {
        this.afterCommit();
        return;
      }
    }
    const changed = await tenantTransaction(this.dataSource, async (manager) => {
      const mission = await this.missions.lockForTenant(manager, tenantId, missionId);
      const now = new Date();
      if (!mission || !(await change(manager, mission, now))) return false;
      await this.finish(manager, mission, now, (saved) => this.missions.save(manager, saved));
      return true;
    });
    if (changed) this.afterCommit();
  }

  /** Stamps and saves a changed mission; a final one is announced in the same transaction. */
  private async finish(manager: EntityManager, mission: MissionEntity, now: Date, save: (mission: MissionEntity) => Promise<void>): Promise<void> {
    mission.updatedAt = now;
    if (FINAL_MISSION_STATUSES.includes(mission.status) || mission.status === 'awaiting_approval') mission.nextCheckAt = null;
    await save(mission);
    if (FINAL_MISSION_STATUSES.includes(mission.status)) await announceCompletion(manager, mission);
  }
}

/** A deadlock PostgreSQL broke, or a serialization failure: the transaction was rolled back whole. */
function isRetryableConflict(error: unknown): boolean {
  const state = sqlStateOf(error);
  return state === '40P01' || state === '40001';
}

/** Thrown to roll back a transaction worked out from a known version that changed nothing (see transition). */
const NOTHING_TO_DO = Symbol('nothing to do');
