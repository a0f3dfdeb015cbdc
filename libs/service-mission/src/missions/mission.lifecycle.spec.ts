import { randomUUID } from 'node:crypto';
import type { EntityManager } from 'typeorm';
import { FINAL_MISSION_STATUSES, MessageTypes, MissionCompletedEventSchema } from '@mission/contracts';
import { MissionEntity } from './mission.entity';
import { announceCompletion } from './mission.lifecycle';

/** What announceCompletion writes into the outbox, read from its INSERT's parameters. */
async function announced(mission: MissionEntity): Promise<{ type: unknown; payload: unknown }> {
  const inserts: unknown[][] = [];
  const manager = { query: async (_sql: string, parameters: unknown[]) => void inserts.push(parameters) } as unknown as EntityManager;
  await announceCompletion(manager, mission);
  const [[, , type, , payload]] = inserts;
  return { type, payload: JSON.parse(payload as string) };
}

describe('announceCompletion', () => {
  it.each(FINAL_MISSION_STATUSES)('publishes a mission.completed its schema accepts for a mission %s', async (status) => {
    const mission = Object.assign(new MissionEntity(), { id: randomUUID(), tenantId: randomUUID(), status, updatedAt: new Date(), completedAt: new Date() });
    const { type, payload } = await announced(mission);
    expect(type).toBe(MessageTypes.missionCompleted);
    expect(MissionCompletedEventSchema.parse(payload)).toEqual({ missionId: mission.id, status, completedAt: mission.completedAt?.toISOString() });
  });
});
