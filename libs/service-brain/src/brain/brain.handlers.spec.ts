import { Messages, Topics } from '@mission/contracts';
import { brainRequestHandlers } from './brain.handlers';
import type { BrainService } from './brain.service';

describe('brain-service request handlers', () => {
  it('answer every request of Topics.brainRequests in the catalogue, and nothing else', () => {
    const handlers = brainRequestHandlers({} as BrainService);
    const catalogue = Object.values(Messages).filter((message) => message.topic === Topics.brainRequests);
    expect(catalogue.length).toBeGreaterThan(0);
    expect(Object.keys(handlers).sort()).toEqual(catalogue.map((message) => message.type).sort());
  });
});
