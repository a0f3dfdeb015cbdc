import { isForUser, missionContext, outputLines, timeLeft } from './approvals';

describe('console approvals', () => {
  it('shows a user the unassigned items and their own, names compared case-insensitively', () => {
    expect(isForUser({}, 'ada')).toBe(true);
    expect(isForUser({ assignees: [] }, undefined)).toBe(true);
    expect(isForUser({ assignees: ['Ada', 'bob'] }, 'ada')).toBe(true);
    expect(isForUser({ assignees: ['bob'] }, 'ada')).toBe(false);
    // A token without a username (a machine client's) decides no assigned item.
    expect(isForUser({ assignees: ['ada'] }, undefined)).toBe(false);
  });

  it('gives an item its mission and the outputs of the steps before its own, in order', () => {
    const context = missionContext(
      {
        title: 'Report',
        objective: 'Publish it',
        status: 'awaiting_approval',
        steps: [
          { index: 0, type: 'brain.query', status: 'succeeded', output: { results: [{ title: 'Q3', text: 'Revenue   rose\nsharply' }] } },
          { index: 1, type: 'approval', status: 'succeeded', hitId: 'h1', output: { decision: 'approved', decidedBy: 'u1', comment: 'ok' } },
          { index: 2, type: 'approval', status: 'running', hitId: 'h2' },
          { index: 3, type: 'brain.query', status: 'pending' },
        ],
      },
      'h2',
    );
    expect(context).toEqual({
      title: 'Report',
      objective: 'Publish it',
      status: 'awaiting_approval',
      earlier: [
        { index: 0, type: 'brain.query', status: 'succeeded', lines: ['Q3: Revenue rose sharply'] },
        { index: 1, type: 'approval', status: 'succeeded', lines: ['Approved by u1: “ok”'] },
      ],
    });
    // An item whose step is not found (a mission read before the step started) has no earlier steps to show.
    expect(missionContext({ title: 't', objective: 'o', status: 'running', steps: [] }, 'h9').earlier).toEqual([]);
  });

  it('clips long passages and says when a query found nothing', () => {
    expect(outputLines({ type: 'brain.query', output: { results: [] } })).toEqual(['No passage found.']);
    const [line] = outputLines({ type: 'brain.query', output: { results: [{ text: 'x'.repeat(1_000) }] } });
    expect(line).toHaveLength(280);
    expect(line?.endsWith('…')).toBe(true);
    expect(outputLines({ type: 'approval', output: { decision: 'expired' } })).toEqual(['Expired']);
  });

  it('says how long an item has left', () => {
    const now = Date.parse('2026-11-26T12:00:00Z');
    expect(timeLeft('2026-11-26T12:04:10Z', now)).toBe('in 5 min');
    expect(timeLeft('2026-11-26T14:05:00Z', now)).toBe('in 2 h 5 min');
    expect(timeLeft('2026-11-26T13:00:00Z', now)).toBe('in 1 h');
    expect(timeLeft('2026-11-30T12:00:00Z', now)).toBe('in 4 days');
    expect(timeLeft('2026-11-26T11:59:59Z', now)).toBe('overdue');
    expect(timeLeft('not a date', now)).toBe('');
  });
});
