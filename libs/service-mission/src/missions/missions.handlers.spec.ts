import { Messages, Topics } from '@mission/contracts';
import { missionRequestHandlers } from './missions.handlers';
import type { MissionsService } from './missions.service';

describe('mission-service request handlers', () => {
  it('answer every request of Topics.missionRequests in the catalogue, and nothing else', () => {
    const handlers = missionRequestHandlers({} as MissionsService);
    const catalogue = Object.values(Messages).filter((message) => message.topic === Topics.missionRequests);
    expect(catalogue.length).toBeGreaterThan(0);
    expect(Object.keys(handlers).sort()).toEqual(catalogue.map((message) => message.type).sort());
  });
});
