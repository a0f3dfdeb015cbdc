import { randomUUID } from 'node:crypto';
import { KeyEncryptionKey, LocalKeyProvider, TransitCipher } from '@mission/crypto';
import { PayloadCodec, sealedJsonCodec } from '../payload-codec';
import { describeBusContract } from '../testing';
import { InProcessBroker, InProcessBus } from './in-process-bus';

const silent = { warn: () => undefined, error: () => undefined };

function inProcessContract(name: string, codec?: () => PayloadCodec): void {
  describeBusContract(name, async () => {
    const broker = new InProcessBroker();
    const retry = { attempts: 3, initialBackoffMs: 10, maxBackoffMs: 20 };
    const suffix = randomUUID();
    return {
      topics: {
        requests: `contract.requests.${suffix}`,
        operatorRequests: `contract.operator.${suffix}`,
        events: `contract.events.${suffix}`,
        unserved: `contract.unserved.${suffix}`,
      },
      retry,
      createBus: () => new InProcessBus(broker, { retry, logger: silent, ...(codec ? { codec: codec() } : {}) }),
      keysOnOnePartition: (_topic, count) => Array.from({ length: count }, (_, n) => `key-${n}-${suffix}`),
      deadLetters: async (topic) => broker.deadLetters(topic),
      teardown: async () => undefined,
    };
  });
}

inProcessContract('in-process');

// The same semantics with the codec a deployment seals payloads with: it is the bus's, not Kafka's.
const kek = KeyEncryptionKey.generate();
inProcessContract('in-process, sealed', () => sealedJsonCodec(new TransitCipher(new LocalKeyProvider(kek))));
