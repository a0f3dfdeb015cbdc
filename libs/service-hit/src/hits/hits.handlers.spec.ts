import { Messages, Topics } from '@mission/contracts';
import { hitRequestHandlers } from './hits.handlers';
import type { HitsService } from './hits.service';

describe('hit-service request handlers', () => {
  it('answer every request of Topics.hitRequests in the catalogue, and nothing else', () => {
    const handlers = hitRequestHandlers({} as HitsService);
    const catalogue = Object.values(Messages).filter((message) => message.topic === Topics.hitRequests);
    expect(catalogue.length).toBeGreaterThan(0);
    expect(Object.keys(handlers).sort()).toEqual(catalogue.map((message) => message.type).sort());
  });
});
