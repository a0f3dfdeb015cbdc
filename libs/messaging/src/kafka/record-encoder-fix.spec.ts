import fc from 'fast-check';
import { fixKafkajsRecordEncoder, type RecordEncoder, type RecordInput } from './record-encoder-fix';

const RECORD_MODULE = 'kafkajs/src/protocol/recordBatch/record/v0';
const PRODUCE_REQUEST_MODULE = 'kafkajs/src/protocol/requests/produce/v3/request';

type ProduceRequest = (request: Record<string, unknown>) => { encode: () => Promise<{ buffer: Buffer }> };

/** Loads modules in a registry of their own: kafkajs as shipped, or as fixed when `fix` is set. */
function isolated<T>(load: () => T): T {
  let loaded: T | undefined;
  jest.isolateModules(() => {
    loaded = load();
  });
  return loaded as T;
}

// eslint-disable-next-line @typescript-eslint/no-require-imports
const shippedRecord = isolated(() => require(RECORD_MODULE) as RecordEncoder);
const fixed = isolated(() => {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const fix = (require('./record-encoder-fix') as { fixKafkajsRecordEncoder: typeof fixKafkajsRecordEncoder }).fixKafkajsRecordEncoder();
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return { fix, record: require(RECORD_MODULE) as RecordEncoder, produce: require(PRODUCE_REQUEST_MODULE) as ProduceRequest };
});

const text = fc.oneof(fc.string({ maxLength: 300 }), fc.string({ unit: 'grapheme', maxLength: 80 }), fc.string({ unit: 'binary', maxLength: 80 }));
const bytes = fc.uint8Array({ maxLength: 700 }).map((array) => Buffer.from(array));
const headerValue = fc.oneof(text, bytes);
const records: fc.Arbitrary<RecordInput> = fc.record(
  {
    offsetDelta: fc.integer({ min: 0, max: 2 ** 31 - 1 }),
    timestampDelta: fc.oneof(fc.integer({ min: -1_000_000, max: 1_000_000 }), fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER })),
    key: fc.oneof(fc.constant(null), text, bytes),
    value: fc.oneof(fc.constant(null), text, bytes),
    headers: fc.dictionary(
      fc.oneof(fc.string({ minLength: 1, maxLength: 40 }), fc.string({ unit: 'grapheme', minLength: 1, maxLength: 20 })),
      fc.oneof(headerValue, fc.array(headerValue, { maxLength: 3 })),
      { maxKeys: 12 },
    ),
  },
  { requiredKeys: [] },
);

describe('the single-buffer kafkajs record encoder', () => {
  it('is what kafkajs uses once fixed', () => {
    expect(fixed.fix).toBe(true);
    expect(fixed.record.toString()).not.toBe(shippedRecord.toString());
    expect(fixed.record.toString()).toContain('plainBytes');
  });

  it('writes the bytes kafkajs writes, for any record', () => {
    fc.assert(
      fc.property(records, (record) => {
        expect(fixed.record(record).buffer.equals(shippedRecord(record).buffer)).toBe(true);
      }),
      { numRuns: 2_000 },
    );
  });

  it('writes a message of the bus, with its headers, as kafkajs does', () => {
    const message: RecordInput = {
      offsetDelta: 3,
      timestampDelta: 12,
      key: 'tenant-a:7b7f2c1e',
      value: Buffer.alloc(900, 7),
      headers: {
        'message-id': '0e3d1f7a-5b9c-4c55-9a8e-3f1f6d2b8c11',
        'message-type': 'mission.get',
        'correlation-id': '0e3d1f7a-5b9c-4c55-9a8e-3f1f6d2b8c11',
        'tenant-id': 'tenant-a',
        traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
        'reply-to': 'replies.gateway.2d1c',
        'request-deadline': '1764000000000',
        'payload-encryption': 'sealed',
        'payload-key': 'k1:'.padEnd(120, 'x'),
        multi: ['a', 'b'],
      },
    };
    expect(fixed.record(message).buffer.toString('hex')).toBe(shippedRecord(message).buffer.toString('hex'));
  });

  it('writes varints at their byte boundaries, and timestamp deltas beyond what a double holds exactly, as kafkajs does', () => {
    const edges = [0, 1, -1, 63, 64, -64, -65, 127, 128, 8_191, 8_192, 2 ** 20, 2 ** 27, 2 ** 31 - 1, -(2 ** 31)];
    const timestamps = [...edges, 2 ** 51, -(2 ** 51), 2 ** 51 + 2, -(2 ** 51) - 2, 2 ** 52 + 1, -(2 ** 52) - 1, 2 ** 53 - 1, -(2 ** 53) + 1, 2 ** 53, -(2 ** 60), -0];
    for (const offsetDelta of edges) expect(fixed.record({ offsetDelta }).buffer.equals(shippedRecord({ offsetDelta }).buffer)).toBe(true);
    for (const timestampDelta of timestamps) expect(fixed.record({ timestampDelta }).buffer.toString('hex')).toBe(shippedRecord({ timestampDelta }).buffer.toString('hex'));
    // kafkajs refuses a fractional delta (its Long is a BigInt); so does the fix, through the same code.
    for (const timestampDelta of [1.5, -0.5]) {
      expect(() => shippedRecord({ timestampDelta })).toThrow(RangeError);
      expect(() => fixed.record({ timestampDelta })).toThrow(RangeError);
    }
    // Sized before the key, as in kafkajs: a fractional delta with a number key fails on the delta.
    expect(() => fixed.record({ timestampDelta: 1.5, key: 5 as unknown as string })).toThrow(RangeError);
    expect(() => shippedRecord({ timestampDelta: 1.5, key: 5 as unknown as string })).toThrow(RangeError);
    // kafkajs sizes a typed array's bytes and writes its text: such a record is left to kafkajs.
    const typed = { key: new Uint8Array([1, 2, 3]) as unknown as Buffer, value: 'v', headers: { h: new Uint8Array([4]) as unknown as Buffer } };
    expect(fixed.record(typed).buffer.equals(shippedRecord(typed).buffer)).toBe(true);
    for (const length of [0, 63, 64, 127, 128, 8_192]) {
      const record = { key: 'k'.repeat(length), value: Buffer.alloc(length, 3), headers: { ['h'.repeat(length + 1)]: 'v'.repeat(length) } };
      expect(fixed.record(record).buffer.equals(shippedRecord(record).buffer)).toBe(true);
    }
  });

  it('leaves a produce request byte for byte as kafkajs encodes it', async () => {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const shippedProduce = isolated(() => require(PRODUCE_REQUEST_MODULE) as ProduceRequest);
    const messages = Array.from({ length: 5 }, (_, index) => ({
      key: `k${index}`,
      value: `{"n":${index}}`,
      timestamp: 1_764_000_000_000 + index,
      headers: { 'message-id': `id-${index}`, 'tenant-id': 'tenant-a' },
    }));
    const request = {
      acks: -1,
      timeout: 30_000,
      topicData: [{ topic: 'mission.requests.v1', partitions: [{ partition: 2, firstSequence: 9, messages }] }],
    };
    const [ours, theirs] = await Promise.all([fixed.produce(request).encode(), shippedProduce(request).encode()]);
    expect(ours.buffer.equals(theirs.buffer)).toBe(true);
  });

  it('is not put in place when kafkajs already loaded its produce request, or ships another record module', () => {
    const late = isolated(() => {
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      require(PRODUCE_REQUEST_MODULE);
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      return (require('./record-encoder-fix') as { fixKafkajsRecordEncoder: typeof fixKafkajsRecordEncoder }).fixKafkajsRecordEncoder();
    });
    expect(late).toBe(false);
    const other = isolated(() => {
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const module = require.cache[require.resolve(RECORD_MODULE)] ?? (require(RECORD_MODULE), require.cache[require.resolve(RECORD_MODULE)]);
      if (module) module.exports = () => undefined;
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      return (require('./record-encoder-fix') as { fixKafkajsRecordEncoder: typeof fixKafkajsRecordEncoder }).fixKafkajsRecordEncoder();
    });
    expect(other).toBe(false);
  });

  it("is not put in place when kafkajs's Encoder keeps its bytes otherwise than the one this was written for", () => {
    const differentEncoder = isolated(() => {
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      require('kafkajs/src/protocol/encoder');
      const module = require.cache[require.resolve('kafkajs/src/protocol/encoder')];
      const Shipped = module?.exports as new (size?: number) => { get buffer(): Buffer };
      // The same bytes through another field: an Encoder made without its constructor holds none.
      class Elsewhere extends Shipped {
        private readonly made = true;
        override get buffer(): Buffer {
          return this.made ? super.buffer : Buffer.alloc(0);
        }
      }
      if (module) module.exports = Elsewhere;
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      return (require('./record-encoder-fix') as { fixKafkajsRecordEncoder: typeof fixKafkajsRecordEncoder }).fixKafkajsRecordEncoder();
    });
    expect(differentEncoder).toBe(false);
  });
});
