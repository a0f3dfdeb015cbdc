import { randomUUID } from 'node:crypto';
import {
  DomainError,
  ErrorCode,
  HitDecidedEvent,
  HitDecidedEventSchema,
  HitEventSchemas,
  MessageTypes,
  MissionCancelledEventSchema,
  MissionCompletedEventSchema,
  MissionEventSchemas,
  MissionQueuedEventSchema,
  StepResultSchema,
} from './index';

/** `hit.decided` as HitsService.decide builds it: the comment only when the decision had one. */
function decided(comment?: string): HitDecidedEvent {
  return {
    hitId: randomUUID(),
    missionId: randomUUID(),
    stepIndex: 1,
    decision: 'approved',
    decidedBy: 'user-7f3a',
    decidedAt: new Date().toISOString(),
    ...(comment !== undefined ? { comment } : {}),
  };
}

describe('event schemas', () => {
  it('accept the mission events as mission-service publishes them', () => {
    const missionId = randomUUID();
    expect(MissionQueuedEventSchema.parse({ missionId })).toEqual({ missionId });
    expect(MissionCancelledEventSchema.parse({ missionId })).toEqual({ missionId });
    const completed = { missionId, status: 'rejected', completedAt: new Date().toISOString() };
    expect(MissionCompletedEventSchema.parse(completed)).toEqual(completed);
  });

  it('accept hit.decided as hit-service publishes it, with and without a comment', () => {
    for (const event of [decided(), decided('Numbers check out')]) expect(HitDecidedEventSchema.parse(event)).toEqual(event);
  });

  it('accept a field they do not know, as a newer producer may add one, and leave it out', () => {
    const missionId = randomUUID();
    expect(MissionQueuedEventSchema.parse({ missionId, priority: 'high' })).toEqual({ missionId });
  });

  it.each([
    ['a missing field', MissionQueuedEventSchema, {}, 'missionId'],
    ['an id that is not a UUID', MissionCancelledEventSchema, { missionId: 'mission-1' }, 'missionId'],
    ['a status that is no mission status', MissionCompletedEventSchema, { missionId: randomUUID(), status: 'done', completedAt: new Date().toISOString() }, 'status'],
    ['a time that is not RFC 3339', MissionCompletedEventSchema, { missionId: randomUUID(), status: 'succeeded', completedAt: 'yesterday' }, 'completedAt'],
    ['a decision other than approved or rejected', HitDecidedEventSchema, { ...decided(), decision: 'maybe' }, 'decision'],
    ['a negative step index', HitDecidedEventSchema, { ...decided(), stepIndex: -1 }, 'stepIndex'],
    ['a comment that is not text', HitDecidedEventSchema, { ...decided(), comment: 42 }, 'comment'],
  ])('refuse %s', (_label, schema, payload, field) => {
    const result = schema.safeParse(payload);
    expect(result.success).toBe(false);
    expect(result.error?.issues.map((issue) => issue.path.join('.'))).toEqual([field]);
  });

  it('are catalogued by the message types of their topics', () => {
    expect(Object.keys(MissionEventSchemas).sort()).toEqual([
      MessageTypes.missionAwaitingApproval,
      MessageTypes.missionCancelled,
      MessageTypes.missionCompleted,
      MessageTypes.missionQueued,
    ]);
    expect(Object.keys(HitEventSchemas).sort()).toEqual([MessageTypes.hitCreated, MessageTypes.hitDecided, MessageTypes.hitExpired]);
  });
});

describe('StepResultSchema', () => {
  it('accepts the replies a server sends: its result, or the body of its domain error', () => {
    expect(StepResultSchema.parse({ ok: true, data: { query: 'q', results: [] } })).toEqual({ ok: true, data: { query: 'q', results: [] } });
    const error = new DomainError(ErrorCode.ValidationFailed, 'Query is invalid', [{ field: 'q', message: 'q must not be empty' }]).toBody();
    expect(StepResultSchema.parse({ ok: false, error })).toEqual({ ok: false, error });
  });

  it.each([
    ['no envelope', { results: [] }],
    ['an error without a body', { ok: false }],
    ['an error code no service sends', { ok: false, error: { code: 'teapot', message: 'short and stout' } }],
  ])('refuses %s', (_label, payload) => {
    expect(StepResultSchema.safeParse(payload).success).toBe(false);
  });
});
