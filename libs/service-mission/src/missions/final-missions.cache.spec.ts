import { Messages, Topics, type MissionStatus, type MissionView } from '@mission/contracts';
import { isImmutable, on, type RequestHandler, requestHandlers } from '@mission/messaging';
import { FinalMissionCache } from './final-missions.cache';

const TENANT_A = '11111111-1111-4111-8111-111111111111';
const TENANT_B = '22222222-2222-4222-8222-222222222222';

function view(id: string, status: MissionStatus, objective = 'Objective'): MissionView {
  const at = '2026-11-25T10:00:00.000Z';
  return {
    id,
    title: 'Title',
    objective,
    status,
    metadata: { team: 'a' },
    steps: [{ index: 0, type: 'brain.query', status: 'succeeded', output: { passages: [] } }],
    createdAt: at,
    updatedAt: at,
  };
}

describe('FinalMissionCache', () => {
  it('keeps a final mission for its own tenant only', () => {
    const cache = new FinalMissionCache();
    const mission = view('aaaaaaaa-0000-4000-8000-000000000001', 'succeeded');
    cache.offer(TENANT_A, mission);
    expect(cache.get(TENANT_A, mission.id)).toEqual(mission);
    expect(cache.get(TENANT_B, mission.id)).toBeUndefined();
  });

  it('never keeps a mission that may still change', () => {
    const cache = new FinalMissionCache();
    (['queued', 'running', 'awaiting_approval'] as const).forEach((status, n) => cache.offer(TENANT_A, view(`aaaaaaaa-0000-4000-8000-00000000000${n}`, status)));
    expect(cache.size).toBe(0);
    (['succeeded', 'failed', 'rejected', 'cancelled'] as const).forEach((status, n) => cache.offer(TENANT_A, view(`bbbbbbbb-0000-4000-8000-00000000000${n}`, status)));
    expect(cache.size).toBe(4);
  });

  it('hands out a view nobody can change', () => {
    const cache = new FinalMissionCache();
    const mission = view('aaaaaaaa-0000-4000-8000-000000000002', 'failed');
    cache.offer(TENANT_A, mission);
    const served = cache.get(TENANT_A, mission.id) as MissionView;
    expect(() => ((served as { status: string }).status = 'running')).toThrow(TypeError);
    expect(() => ((served.metadata as Record<string, unknown>).team = 'b')).toThrow(TypeError);
    expect(() => (served.steps as unknown as unknown[]).push({})).toThrow(TypeError);
  });

  it('holds views the reply schema passes unchanged, so a read of one is checked and encoded once (@mission/messaging immutable)', () => {
    const cache = new FinalMissionCache();
    const mission = view('aaaaaaaa-0000-4000-8000-000000000003', 'succeeded');
    cache.offer(TENANT_A, mission);
    const served = cache.get(TENANT_A, mission.id);
    expect(isImmutable(served)).toBe(true);
    const check = jest.spyOn(Messages.missionGet.reply, 'safeParse');
    const handler = requestHandlers(Topics.missionRequests, [on(Messages.missionGet, async () => served as MissionView)])[Messages.missionGet.type] as RequestHandler;
    const incoming = { id: 'm', topic: Topics.missionRequests, type: Messages.missionGet.type, key: 'k', payload: { id: mission.id }, headers: {}, attempt: 1 };
    return Promise.all([handler(incoming), handler(incoming)]).then(([first, second]) => {
      expect(first).toBe(served);
      expect(second).toBe(served);
      expect(check).toHaveBeenCalledTimes(1);
      check.mockRestore();
    });
  });

  it('stays within its size, evicting the least recently read', () => {
    const big = 'x'.repeat(1_000);
    const cache = new FinalMissionCache({ maxBytes: 12_000 });
    const ids = [1, 2, 3, 4].map((n) => `aaaaaaaa-0000-4000-8000-00000000000${n}`);
    cache.offer(TENANT_A, view(ids[0] as string, 'succeeded', big));
    cache.offer(TENANT_A, view(ids[1] as string, 'succeeded', big));
    cache.offer(TENANT_A, view(ids[2] as string, 'succeeded', big));
    expect(cache.get(TENANT_A, ids[0] as string)).toBeDefined();
    cache.offer(TENANT_A, view(ids[3] as string, 'succeeded', big));
    expect(cache.get(TENANT_A, ids[0] as string)).toBeDefined();
    expect(cache.get(TENANT_A, ids[1] as string)).toBeUndefined();
    expect(cache.size).toBe(3);
    // One mission larger than the whole budget is not kept, and evicts nothing.
    cache.offer(TENANT_A, view('aaaaaaaa-0000-4000-8000-000000000009', 'succeeded', 'y'.repeat(4_200)));
    expect(cache.get(TENANT_A, 'aaaaaaaa-0000-4000-8000-000000000009')).toBeUndefined();
    expect(cache.size).toBe(3);
  });

  it('is off with a size of 0, and refuses a size that is not a whole number of bytes', () => {
    const off = new FinalMissionCache({ maxBytes: 0 });
    off.offer(TENANT_A, view('aaaaaaaa-0000-4000-8000-000000000001', 'succeeded'));
    expect(off.get(TENANT_A, 'aaaaaaaa-0000-4000-8000-000000000001')).toBeUndefined();
    expect(() => new FinalMissionCache({ maxBytes: -1 })).toThrow(RangeError);
    expect(() => new FinalMissionCache({ maxBytes: 1.5 })).toThrow(RangeError);
  });
});
