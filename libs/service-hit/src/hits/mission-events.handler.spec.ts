import { randomUUID } from 'node:crypto';
import { MessageTypes, Topics } from '@mission/contracts';
import { IncomingMessage, PoisonMessageError } from '@mission/messaging';
import { missionEventHandler } from './mission-events.handler';

function missionEvent(type: string, payload: unknown): IncomingMessage {
  return { id: randomUUID(), topic: Topics.missionEvents, type, key: `${randomUUID()}:mission`, payload, headers: {}, attempt: 1 };
}

describe('missionEventHandler', () => {
  const cancelled: Array<{ messageId: string; missionId: string }> = [];
  const handle = missionEventHandler({ cancelForMission: async (messageId, missionId) => void cancelled.push({ messageId, missionId }) });

  beforeEach(() => (cancelled.length = 0));

  it('closes the waiting items of a cancelled mission, once per message', async () => {
    const missionId = randomUUID();
    const message = missionEvent(MessageTypes.missionCancelled, { missionId });
    await handle(message);
    expect(cancelled).toEqual([{ messageId: message.id, missionId }]);
  });

  it('ignores the other mission events', async () => {
    await handle(missionEvent(MessageTypes.missionQueued, { missionId: randomUUID() }));
    await handle(missionEvent(MessageTypes.missionCompleted, { missionId: 'not even checked' }));
    expect(cancelled).toEqual([]);
  });

  it('refuses a mission.cancelled without a mission id as a poison message', async () => {
    await expect(handle(missionEvent(MessageTypes.missionCancelled, { mission: randomUUID() }))).rejects.toThrow(PoisonMessageError);
    expect(cancelled).toEqual([]);
  });
});
