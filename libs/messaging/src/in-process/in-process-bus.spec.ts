import { randomUUID } from 'node:crypto';
import { describeBusContract } from '../testing';
import { InProcessBroker, InProcessBus } from './in-process-bus';

const silent = { warn: () => undefined, error: () => undefined };

describeBusContract('in-process', async () => {
  const broker = new InProcessBroker();
  const retry = { attempts: 3, initialBackoffMs: 10, maxBackoffMs: 20 };
  const suffix = randomUUID();
  return {
    topics: { requests: `contract.requests.${suffix}`, operatorRequests: `contract.operator.${suffix}`, events: `contract.events.${suffix}`, unserved: `contract.unserved.${suffix}` },
    retry,
    createBus: () => new InProcessBus(broker, { retry, logger: silent }),
    deadLetters: async (topic) => broker.deadLetters(topic),
    teardown: async () => undefined,
  };
});
