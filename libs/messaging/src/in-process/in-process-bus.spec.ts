import { randomUUID } from 'node:crypto';
import { KeyEncryptionKey, LocalKeyProvider, TransitCipher } from '@mission/crypto';
import { NO_BUS_METRICS } from '../bus';
import { immutable } from '../immutable';
import { eventHandlers } from '../event-handlers';
import { PayloadCodec, plainJsonCodec, sealedJsonCodec } from '../payload-codec';
import { runWithTenant } from '@mission/tenant-context';
import { z } from 'zod';
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

describe('InProcessBus and a typed subscriber', () => {
  it('never opens an event of a type the subscriber does not handle, counting it ignored', async () => {
    const broker = new InProcessBroker();
    const opened: string[] = [];
    const outcomes: string[] = [];
    const counting: PayloadCodec = {
      encode: plainJsonCodec.encode,
      decode: (value, headers) => (opened.push(headers['message-type'] ?? ''), plainJsonCodec.decode(value, headers)),
    };
    const subscriber = new InProcessBus(broker, {
      logger: silent,
      codec: counting,
      metrics: { ...NO_BUS_METRICS, handled: (_topic, _group, _seconds, outcome) => void outcomes.push(outcome) },
    });
    const handled: number[] = [];
    subscriber.subscribe('typed.events', 'typed', eventHandlers({ wanted: z.object({ n: z.int() }) }, { wanted: async ({ n }) => void handled.push(n) }));
    const publisher = new InProcessBus(broker, { logger: silent });
    await Promise.all([subscriber.start(), publisher.start()]);
    await runWithTenant({ tenantId: randomUUID() }, async () => {
      await publisher.publish('typed.events', { type: 'other', key: 'k', payload: { n: 1 } });
      await publisher.publish('typed.events', { type: 'wanted', key: 'k', payload: { n: 2 } });
    });
    for (let i = 0; i < 100 && handled.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    await publisher.close();
    await subscriber.close();
    expect(handled).toEqual([2]);
    expect(opened).toEqual(['wanted']);
    expect(outcomes).toEqual(['ignored', 'ok']);
  });
});

describe('InProcessBus and an immutable reply', () => {
  async function served(reply: () => unknown, codec?: PayloadCodec): Promise<unknown[]> {
    const broker = new InProcessBroker();
    const server = new InProcessBus(broker, { logger: silent, ...(codec ? { codec } : {}) });
    const client = new InProcessBus(broker, { logger: silent, ...(codec ? { codec } : {}) });
    server.serve('shared.requests', 'server', { get: async () => reply() });
    await Promise.all([server.start(), client.start()]);
    try {
      return await runWithTenant({ tenantId: randomUUID() }, async () => [await client.request('shared.requests', 'get', {}), await client.request('shared.requests', 'get', {})]);
    } finally {
      await client.close();
      await server.close();
    }
  }

  it('hands an immutable reply over as it is (nobody can change it), and copies any other', async () => {
    const cached = immutable({ id: 'a', steps: [{ n: 1 }] });
    const [first, second] = await served(() => cached);
    expect(first).toBe(cached);
    expect(second).toBe(cached);
    const [copy] = await served(() => ({ id: 'b', steps: [] }));
    expect(Object.isFrozen(copy)).toBe(false);
  });

  it('never shares across a sealing codec: the receiver opens its own copy', async () => {
    const cached = immutable({ id: 'a' });
    const [opened] = await served(() => cached, sealedJsonCodec(new TransitCipher(new LocalKeyProvider(KeyEncryptionKey.generate()))));
    expect(opened).toEqual({ id: 'a' });
    expect(opened).not.toBe(cached);
  });
});
