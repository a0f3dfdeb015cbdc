import fc from 'fast-check';
import type { fixKafkajsRecordEncoder } from './record-encoder-fix';
import {
  castagnoli,
  type fixKafkajsProduceRequest,
  KAFKAJS_MODULE_DIGESTS,
  moduleDigest,
  type ProduceMessage,
  type ProduceRequestFactory,
  type ProduceRequestInput,
} from './produce-request-fix';

const PRODUCE_V3 = 'kafkajs/src/protocol/requests/produce/v3/request';
const PRODUCE_V7 = 'kafkajs/src/protocol/requests/produce/v7/request';

type Fixes = { fixKafkajsProduceRequest: typeof fixKafkajsProduceRequest; fixKafkajsRecordEncoder: typeof fixKafkajsRecordEncoder };

/** Loads modules in a registry of their own. */
function isolated<T>(load: () => T): T {
  let loaded: T | undefined;
  jest.isolateModules(() => {
    loaded = load();
  });
  return loaded as T;
}

/* eslint-disable @typescript-eslint/no-require-imports */
const fixes = (): Fixes => ({ ...(require('./produce-request-fix') as Fixes), ...(require('./record-encoder-fix') as Fixes) });
const shipped = isolated(() => ({ v3: require(PRODUCE_V3) as ProduceRequestFactory, v7: require(PRODUCE_V7) as ProduceRequestFactory }));
/** As the bus runs it: the record encoder's fix, then the produce request's. */
const fixed = isolated(() => {
  const { fixKafkajsRecordEncoder, fixKafkajsProduceRequest } = fixes();
  const installed = fixKafkajsRecordEncoder() && fixKafkajsProduceRequest();
  return { installed, v3: require(PRODUCE_V3) as ProduceRequestFactory, v7: require(PRODUCE_V7) as ProduceRequestFactory };
});
/** The produce request's fix alone, over kafkajs's own record encoder. */
const alone = isolated(() => {
  const installed = fixes().fixKafkajsProduceRequest();
  return { installed, v3: require(PRODUCE_V3) as ProduceRequestFactory };
});
/* eslint-enable @typescript-eslint/no-require-imports */

const NOW = 1_764_000_000_000;

async function bytesOf(factory: ProduceRequestFactory, input: ProduceRequestInput): Promise<Buffer> {
  return (await factory(input).encode()).buffer;
}

const text = fc.oneof(fc.string({ maxLength: 200 }), fc.string({ unit: 'grapheme', maxLength: 40 }));
const bytes = fc.uint8Array({ maxLength: 500 }).map((array) => Buffer.from(array));
const timestamp = fc.oneof(
  fc.constant(undefined),
  fc.constant(null),
  fc.integer({ min: NOW - 100_000, max: NOW + 100_000 }),
  fc.integer({ min: 0, max: 2 ** 45 }),
  fc.integer({ min: NOW - 1_000, max: NOW + 1_000 }).map(String),
);
const message: fc.Arbitrary<ProduceMessage> = fc.record(
  {
    key: fc.oneof(fc.constant(null), text, bytes),
    value: fc.oneof(fc.constant(null), text, bytes),
    headers: fc.dictionary(fc.string({ minLength: 1, maxLength: 20 }), fc.oneof(text, bytes, fc.array(text, { maxLength: 3 })), { maxKeys: 9 }),
    timestamp,
    partition: fc.nat(10),
  },
  { requiredKeys: [] },
);
const request: fc.Arbitrary<ProduceRequestInput> = fc.record(
  {
    acks: fc.constantFrom(-1, 0, 1),
    timeout: fc.integer({ min: 0, max: 2 ** 31 - 1 }),
    transactionalId: fc.oneof(fc.constant(undefined), fc.constant(null), fc.constant(''), text),
    producerId: fc.oneof(fc.constant(undefined), fc.integer({ min: -1, max: 2 ** 31 }), fc.bigInt({ min: -1n, max: 2n ** 62n }).map(String)),
    producerEpoch: fc.oneof(fc.constant(undefined), fc.integer({ min: 0, max: 32_767 })),
    topicData: fc.array(
      fc.record({
        topic: text,
        partitions: fc.array(
          fc.record(
            { partition: fc.integer({ min: 0, max: 2 ** 31 - 1 }), firstSequence: fc.integer({ min: 0, max: 2 ** 31 - 1 }), messages: fc.array(message, { maxLength: 6 }) },
            { requiredKeys: ['partition', 'messages'] },
          ),
          { maxLength: 3 },
        ),
      }),
      { minLength: 1, maxLength: 3 },
    ),
  },
  { requiredKeys: ['acks', 'timeout', 'topicData'] },
) as fc.Arbitrary<ProduceRequestInput>;

/** A produce request of the bus: a few sealed messages with their headers, on two partitions. */
const busRequest: ProduceRequestInput = {
  acks: -1,
  timeout: 30_000,
  producerId: 7,
  producerEpoch: 0,
  topicData: [
    {
      topic: 'mission.requests.v1',
      partitions: [0, 4].map((partition) => ({
        partition,
        firstSequence: 1_000 + partition,
        messages: Array.from({ length: 5 }, (_, index) => ({
          key: `tenant-a:${partition}-${index}`,
          value: Buffer.alloc(420, index),
          headers: {
            'message-id': `0e3d1f7a-5b9c-4c55-9a8e-3f1f6d2b8c1${index}`,
            'message-type': 'mission.get',
            'tenant-id': 'tenant-a',
            traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
            'reply-to': 'replies.gateway.2d1c',
            'request-deadline': String(NOW + 10_000),
            'payload-key': 'k1:'.padEnd(120, 'x'),
          },
        })),
      })),
    },
  ],
};

describe('the one-buffer kafkajs produce request', () => {
  beforeEach(() => {
    // Messages without a timestamp take the clock's: the same one for both encoders.
    jest.spyOn(Date, 'now').mockReturnValue(NOW);
  });

  afterEach(() => {
    jest.restoreAllMocks();
  });

  it('is what kafkajs uses once fixed, in every produce version that reuses version 3', async () => {
    expect(fixed.installed).toBe(true);
    expect(alone.installed).toBe(true);
    expect(fixed.v3.toString()).not.toBe(shipped.v3.toString());
    const request = fixed.v7(busRequest);
    expect(request).toMatchObject({ apiKey: 0, apiVersion: 7, apiName: 'Produce' });
    expect(request.encode.toString()).toContain('encodeProduceRequest');
    expect(fixed.v7({ ...busRequest, acks: 0 }).expectResponse()).toBe(false);
    expect(request.expectResponse()).toBe(true);
  });

  it('writes a request of the bus byte for byte as kafkajs does', async () => {
    const theirs = await bytesOf(shipped.v3, busRequest);
    expect((await bytesOf(fixed.v3, busRequest)).toString('hex')).toBe(theirs.toString('hex'));
    expect((await bytesOf(alone.v3, busRequest)).toString('hex')).toBe(theirs.toString('hex'));
    expect((await bytesOf(fixed.v7, busRequest)).equals(await bytesOf(shipped.v7, busRequest))).toBe(true);
  });

  it('writes the bytes kafkajs writes, for any request', async () => {
    await fc.assert(
      fc.asyncProperty(request, async (input) => {
        const theirs = await bytesOf(shipped.v3, input);
        expect((await bytesOf(fixed.v3, input)).equals(theirs)).toBe(true);
        expect((await bytesOf(alone.v3, input)).equals(theirs)).toBe(true);
      }),
      { numRuns: 500 },
    );
  });

  it('writes empty partitions, transactional batches and 64-bit producer ids as kafkajs does', async () => {
    const edges: ProduceRequestInput[] = [
      { acks: 1, timeout: 5, topicData: [{ topic: 't', partitions: [] }] },
      { acks: 1, timeout: 5, topicData: [{ topic: 't', partitions: [{ partition: 0, messages: [] }] }] },
      { acks: -1, timeout: 5, transactionalId: 'tx', producerId: '9223372036854775807', producerEpoch: 32_767, topicData: busRequest.topicData },
      { acks: -1, timeout: 5, producerId: -1, topicData: [{ topic: 'ü', partitions: [{ partition: 1, messages: [{ timestamp: 0 }, { timestamp: '2' }, { timestamp: 10 }] }] }] },
    ];
    for (const input of edges) expect((await bytesOf(fixed.v3, input)).toString('hex')).toBe((await bytesOf(shipped.v3, input)).toString('hex'));
  });

  it('refuses what kafkajs refuses', async () => {
    const badTopic = { acks: -1, timeout: 5, topicData: [{ topic: 5 as unknown as string, partitions: [] }] };
    // (Errors of another module registry: matched by message, not class.)
    await expect(shipped.v3(badTopic).encode()).rejects.toThrow('argument must be of type string');
    await expect(fixed.v3(badTopic).encode()).rejects.toThrow('argument must be of type string');
    const fractional = { acks: -1, timeout: 5, topicData: [{ topic: 't', partitions: [{ partition: 0, messages: [{ timestamp: 1.5 }] }] }] };
    await expect(shipped.v3(fractional).encode()).rejects.toThrow('cannot be converted to a BigInt');
    await expect(fixed.v3(fractional).encode()).rejects.toThrow('cannot be converted to a BigInt');
  });

  it("leaves a compressed request to kafkajs's own encoding", async () => {
    const gzip = { ...busRequest, compression: 1 };
    expect(fixed.v3(gzip).encode.toString()).not.toContain('encodeProduceRequest');
    expect((await bytesOf(fixed.v3, gzip)).equals(await bytesOf(shipped.v3, gzip))).toBe(true);
  });

  it("computes a batch's CRC-32C as kafkajs does, for any bytes", () => {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const kafkajsCrc = require('kafkajs/src/protocol/recordBatch/crc32C') as (bytes: Buffer) => number;
    // The check value of CRC-32C (RFC 3720, B.4: 32 bytes of zeros).
    expect(castagnoli(Buffer.alloc(32))).toBe(0x8a9136aa);
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 5_000 }), fc.nat(15), (array, skip) => {
        // At any alignment: a batch's bytes start part-way into the request's buffer.
        const bytes = Buffer.from(array).subarray(Math.min(skip, array.length));
        expect(castagnoli(bytes)).toBe(kafkajsCrc(bytes));
      }),
      { numRuns: 500 },
    );
  });

  it('knows the digests of the kafkajs modules it was written for', () => {
    for (const [module, digest] of Object.entries(KAFKAJS_MODULE_DIGESTS)) expect(moduleDigest(module)).toBe(digest);
    expect(moduleDigest('kafkajs/src/no/such/module')).toBeUndefined();
  });

  it('is not put in place when a module differs from the one it was written for, or kafkajs already loaded a produce request', () => {
    const otherFile = isolated(() => fixes().fixKafkajsProduceRequest({ ...KAFKAJS_MODULE_DIGESTS, 'kafkajs/src/protocol/encoder': '0'.repeat(64) }));
    expect(otherFile).toBe(false);
    // Version 7 holds version 3 through 6 and 5; version 4 holds it directly.
    for (const first of [PRODUCE_V7, 'kafkajs/src/protocol/requests/produce/v4/request']) {
      const late = isolated(() => {
        // eslint-disable-next-line @typescript-eslint/no-require-imports
        require(first);
        return fixes().fixKafkajsProduceRequest();
      });
      expect(late).toBe(false);
    }
    const otherExport = isolated(() => {
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      require(PRODUCE_V3);
      const module = require.cache[require.resolve(PRODUCE_V3)];
      if (module) module.exports = () => undefined;
      return fixes().fixKafkajsProduceRequest();
    });
    expect(otherExport).toBe(false);
  });
});
