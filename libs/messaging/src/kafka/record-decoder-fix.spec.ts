import fc from 'fast-check';
import { fixKafkajsRecordDecoder, type KafkaDecoder, type RecordBatchContext, type RecordDecoder } from './record-decoder-fix';

const RECORD_DECODER_MODULE = 'kafkajs/src/protocol/recordBatch/record/v0/decoder';
const BATCH_DECODER_MODULE = 'kafkajs/src/protocol/recordBatch/v0/decoder';

type Decoder = new (buffer: Buffer) => KafkaDecoder;
type BatchDecoder = (decoder: KafkaDecoder) => Promise<{ records: unknown[] }>;
interface Long {
  fromValue(value: string | number | bigint): unknown;
}
type RecordBatchEncoder = (batch: Record<string, unknown>) => Promise<{ buffer: Buffer }>;
type RecordEncoder = (record: Record<string, unknown>) => unknown;

/** Loads modules in a registry of their own. */
function isolated<T>(load: () => T): T {
  let loaded: T | undefined;
  jest.isolateModules(() => {
    loaded = load();
  });
  return loaded as T;
}

/* eslint-disable @typescript-eslint/no-require-imports */
const shipped = isolated(() => ({
  record: require(RECORD_DECODER_MODULE) as RecordDecoder,
  batch: require(BATCH_DECODER_MODULE) as BatchDecoder,
  Decoder: require('kafkajs/src/protocol/decoder') as Decoder,
  Long: require('kafkajs/src/utils/long') as Long,
  encodeBatch: (require('kafkajs/src/protocol/recordBatch/v0') as { RecordBatch: RecordBatchEncoder }).RecordBatch,
  encodeRecord: require('kafkajs/src/protocol/recordBatch/record/v0') as RecordEncoder,
}));
const fixed = isolated(() => {
  const fix = (require('./record-decoder-fix') as { fixKafkajsRecordDecoder: typeof fixKafkajsRecordDecoder }).fixKafkajsRecordDecoder();
  return { fix, record: require(RECORD_DECODER_MODULE) as RecordDecoder, batch: require(BATCH_DECODER_MODULE) as BatchDecoder };
});
/* eslint-enable @typescript-eslint/no-require-imports */

/** A record batch as kafkajs's producer writes it, decoded by both, field for field. */
async function expectSameBatch(batch: Record<string, unknown>): Promise<void> {
  const { buffer } = await shipped.encodeBatch(batch);
  const [ours, theirs] = await Promise.all([fixed.batch(new shipped.Decoder(buffer)), shipped.batch(new shipped.Decoder(buffer))]);
  expect(ours).toEqual(theirs);
  ours.records.forEach((record, index) => {
    const mine = (record as { headers: object }).headers;
    const kafkajs = (theirs.records[index] as { headers: object }).headers;
    expect(Object.keys(mine)).toEqual(Object.keys(kafkajs));
    expect(Object.getPrototypeOf(mine)).toBe(Object.getPrototypeOf(kafkajs));
  });
}

/** One record's bytes (after its length), decoded by both under `context`. */
function expectSameRecord(bytes: Buffer, context: RecordBatchContext): void {
  const ours = fixed.record(new shipped.Decoder(bytes), context);
  const theirs = shipped.record(new shipped.Decoder(bytes), context);
  expect(ours).toEqual(theirs);
  expect(Object.keys(ours.headers)).toEqual(Object.keys(theirs.headers));
}

const headerName = fc.oneof(
  fc.constantFrom('a', 'b', '__proto__', 'toString', 'constructor', 'hasOwnProperty', 'message-id', ''),
  fc.string({ maxLength: 12 }),
  fc.string({ unit: 'grapheme', maxLength: 6 }),
);
const headerValue = fc.oneof(
  fc.string({ maxLength: 60 }),
  fc.uint8Array({ maxLength: 60 }).map((array) => Buffer.from(array)),
);
const record = fc.record(
  {
    key: fc.oneof(
      fc.constant(null),
      fc.string({ maxLength: 40 }),
      fc.uint8Array({ maxLength: 40 }).map((array) => Buffer.from(array)),
    ),
    value: fc.oneof(
      fc.constant(null),
      fc.string({ maxLength: 300 }),
      fc.uint8Array({ maxLength: 300 }).map((array) => Buffer.from(array)),
    ),
    headers: fc.array(fc.tuple(headerName, headerValue), { maxLength: 10 }),
    timestampDelta: fc.oneof(fc.integer({ min: -1_000_000, max: 1_000_000 }), fc.integer({ min: -(2 ** 52), max: 2 ** 52 })),
  },
  { requiredKeys: ['headers'] },
);

/** kafkajs's record input: header pairs gathered by name (repeated names become arrays, written in order). */
function recordInput(input: { key?: unknown; value?: unknown; headers: Array<[string, string | Buffer]>; timestampDelta?: number }, offsetDelta: number): Record<string, unknown> {
  const headers: Record<string, Array<string | Buffer>> = Object.create(null) as Record<string, Array<string | Buffer>>;
  for (const [name, value] of input.headers) (headers[name] ??= []).push(value);
  const plain: Record<string, string | Buffer | Array<string | Buffer>> = {};
  for (const name of Object.keys(headers)) {
    const values = headers[name] as Array<string | Buffer>;
    Object.defineProperty(plain, name, { value: values.length === 1 ? values[0] : values, enumerable: true, writable: true, configurable: true });
  }
  return { key: input.key, value: input.value, headers: plain, timestampDelta: input.timestampDelta ?? 0, offsetDelta };
}

describe('the direct kafkajs record decoder', () => {
  it('is what kafkajs uses once fixed', () => {
    expect(fixed.fix).toBe(true);
    expect(fixed.record.toString()).not.toBe(shipped.record.toString());
    expect(fixed.record.toString()).toContain('readSmallVarLong');
  });

  it('decodes any record batch kafkajs writes into the records kafkajs decodes', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(record, { minLength: 1, maxLength: 6 }),
        fc.oneof(fc.bigInt({ min: 0n, max: 10n ** 14n }), fc.bigInt({ min: 10n ** 14n, max: 2n ** 62n })),
        fc.oneof(fc.integer({ min: 0, max: 2 ** 41 }), fc.constant(1_764_000_000_000)),
        async (records, firstOffset, firstTimestamp) => {
          await expectSameBatch({
            firstOffset: shipped.Long.fromValue(firstOffset.toString()),
            firstTimestamp,
            maxTimestamp: firstTimestamp,
            records: records.map((input, index) => shipped.encodeRecord(recordInput(input, index))),
            lastOffsetDelta: records.length - 1,
          });
        },
      ),
      { numRuns: 400 },
    );
  });

  it('decodes headers named like Object.prototype members, repeated ones, and a null header value, as kafkajs does', () => {
    // attributes 0, timestamp delta 0, offset delta 0, key null, value null, then 6 headers.
    const header = (name: string, value: string | null): number[] => [
      name.length * 2,
      ...Buffer.from(name),
      ...(value === null ? [0x01] : [value.length * 2, ...Buffer.from(value)]),
    ];
    const bytes = Buffer.from([
      0x00,
      0x00,
      0x00,
      0x01,
      0x01,
      12,
      ...header('__proto__', 'p'),
      ...header('toString', 't'),
      ...header('__proto__', 'q'),
      ...header('a', null),
      ...header('a', 'x'),
      ...header('a', 'y'),
    ]);
    expectSameRecord(bytes, { firstOffset: '7', firstTimestamp: '1764000000000' });
    const decoded = fixed.record(new shipped.Decoder(bytes), { firstOffset: '7', firstTimestamp: '1764000000000' });
    expect(Object.getPrototypeOf(decoded.headers)).toBe(Object.prototype);
    expect(decoded.headers.a).toEqual([null, Buffer.from('x'), Buffer.from('y')]);
  });

  it('takes the batch time under log-append time, and reads offsets, timestamps and deltas beyond what a double holds as kafkajs does', () => {
    const delta = (value: bigint): number[] => {
      let encoded = value >= 0n ? value * 2n : -value * 2n - 1n;
      const bytes: number[] = [];
      while (encoded >= 0x80n) {
        bytes.push(Number(encoded & 0x7fn) | 0x80);
        encoded >>= 7n;
      }
      return [...bytes, Number(encoded)];
    };
    for (const timestampDelta of [0n, -1n, 2n ** 47n, -(2n ** 47n), 2n ** 48n, 2n ** 53n + 5n, -(2n ** 53n) - 5n, 2n ** 54n + 5n, 2n ** 56n, -(2n ** 62n)]) {
      const bytes = Buffer.from([0x00, ...delta(timestampDelta), 0x04, 0x01, 0x01, 0x00]);
      for (const firstOffset of ['0', '1', '999999999999999', '1000000000000000', '9007199254740993', '9223372036854775800']) {
        for (const firstTimestamp of ['1764000000000', '-1', '9007199254740993', '99999999999999999']) {
          expectSameRecord(bytes, { firstOffset, firstTimestamp, maxTimestamp: '1764000000999', timestampType: 0 });
          expectSameRecord(bytes, { firstOffset, firstTimestamp, maxTimestamp: '1764000000999', timestampType: 1 });
        }
      }
    }
  });

  it('is not put in place when kafkajs already loaded its record batch decoder, or ships another record decoder', () => {
    /* eslint-disable @typescript-eslint/no-require-imports */
    const late = isolated(() => {
      require(BATCH_DECODER_MODULE);
      return (require('./record-decoder-fix') as { fixKafkajsRecordDecoder: typeof fixKafkajsRecordDecoder }).fixKafkajsRecordDecoder();
    });
    expect(late).toBe(false);
    const other = isolated(() => {
      require(RECORD_DECODER_MODULE);
      const module = require.cache[require.resolve(RECORD_DECODER_MODULE)];
      if (module) module.exports = () => undefined;
      return (require('./record-decoder-fix') as { fixKafkajsRecordDecoder: typeof fixKafkajsRecordDecoder }).fixKafkajsRecordDecoder();
    });
    /* eslint-enable @typescript-eslint/no-require-imports */
    expect(other).toBe(false);
  });
});
