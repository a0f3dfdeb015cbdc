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
      createBus: (metrics) => new InProcessBus(broker, { retry, logger: silent, ...(codec ? { codec: codec() } : {}), ...(metrics ? { metrics } : {}) }),
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
    const original = { id: 'b', steps: [] };
    const [copy] = await served(() => original);
    expect(copy).toEqual(original);
    expect(copy).not.toBe(original);
  });

  it('hands an immutable request to its handler as it is, without making its JSON, and copies any other', async () => {
    const broker = new InProcessBroker();
    const server = new InProcessBus(broker, { logger: silent });
    const client = new InProcessBus(broker, { logger: silent });
    const received: unknown[] = [];
    server.serve('shared.requests', 'server', { put: async (message) => (received.push(message.payload), { ok: true }) });
    await Promise.all([server.start(), client.start()]);
    const request = immutable({ document: { title: 't', content: 'x'.repeat(1_000) } });
    const plain = { document: { title: 'u', content: 'y' } };
    const stringify = jest.spyOn(JSON, 'stringify');
    try {
      await runWithTenant({ tenantId: randomUUID() }, async () => {
        await client.request('shared.requests', 'put', request);
        await client.request('shared.requests', 'put', plain);
      });
      expect(stringify.mock.calls.filter(([value]) => value === request)).toEqual([]);
      expect(stringify.mock.calls.filter(([value]) => value === plain)).toHaveLength(1);
    } finally {
      stringify.mockRestore();
      await client.close();
      await server.close();
    }
    expect(received[0]).toBe(request);
    expect(received[1]).toEqual(plain);
    expect(received[1]).not.toBe(plain);
  });

  it('dead-letters a shared request with its JSON, like any other', async () => {
    const broker = new InProcessBroker();
    const server = new InProcessBus(broker, { logger: silent });
    const client = new InProcessBus(broker, { logger: silent, requestTimeoutMs: 200 });
    server.serve('shared.requests', 'server', { put: async () => ({ ok: true }) });
    await Promise.all([server.start(), client.start()]);
    const request = immutable({ id: 'refused' });
    // Outside any tenant: a tenant topic's server refuses it at admission and parks it.
    await expect(client.request('shared.requests', 'put', request)).rejects.toBeDefined();
    await client.close();
    await server.close();
    const parked = broker.deadLetters('shared.requests');
    expect(parked).toHaveLength(1);
    expect(parked[0].shared).toBeUndefined();
    expect(JSON.parse(String(parked[0].body))).toEqual({ id: 'refused' });
  });

  it('copies an immutable event: only a reply to its requester is shared', async () => {
    const broker = new InProcessBroker();
    const publisher = new InProcessBus(broker, { logger: silent });
    const subscriber = new InProcessBus(broker, { logger: silent });
    const received: unknown[] = [];
    subscriber.subscribe('shared.events', 'subscriber', async (message) => void received.push(message.payload));
    await Promise.all([publisher.start(), subscriber.start()]);
    const event = immutable({ id: 'e' });
    await runWithTenant({ tenantId: randomUUID() }, () => publisher.publish('shared.events', { type: 'x', key: 'k', payload: event }));
    for (let i = 0; i < 100 && received.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    await publisher.close();
    await subscriber.close();
    expect(received).toEqual([{ id: 'e' }]);
    expect(received[0]).not.toBe(event);
  });

  it('is not taken as it is by a requester whose codec is not plain JSON', async () => {
    const broker = new InProcessBroker();
    const server = new InProcessBus(broker, { logger: silent });
    const decoded: string[] = [];
    const counting: PayloadCodec = { encode: plainJsonCodec.encode, decode: (value, headers) => (decoded.push('reply'), plainJsonCodec.decode(value, headers)) };
    const client = new InProcessBus(broker, { logger: silent, codec: counting });
    const cached = immutable({ id: 'a' });
    server.serve('shared.requests', 'server', { get: async () => cached });
    await Promise.all([server.start(), client.start()]);
    const reply = await runWithTenant({ tenantId: randomUUID() }, () => client.request('shared.requests', 'get', {}));
    await client.close();
    await server.close();
    expect(reply).toEqual({ id: 'a' });
    expect(reply).not.toBe(cached);
    expect(decoded).toEqual(['reply']);
  });

  it('never shares across a sealing codec: the receiver opens its own copy', async () => {
    const cached = immutable({ id: 'a' });
    const [opened] = await served(() => cached, sealedJsonCodec(new TransitCipher(new LocalKeyProvider(KeyEncryptionKey.generate()))));
    expect(opened).toEqual({ id: 'a' });
    expect(opened).not.toBe(cached);
  });
});
