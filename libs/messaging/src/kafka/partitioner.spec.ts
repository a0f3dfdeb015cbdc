import fc from 'fast-check';
import { Partitioners, type PartitionerArgs } from 'kafkajs';
import { murmur2, murmur2Partitioner } from './partitioner';

// kafkajs's own murmur2 (64-bit Longs), the one its DefaultPartitioner uses.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const kafkajsMurmur2 = require('kafkajs/src/producer/partitioners/default/murmur2') as (key: Buffer | string) => number;

const keys = fc.oneof(
  fc.uint8Array({ maxLength: 200 }).map((bytes) => Buffer.from(bytes)),
  fc.string({ maxLength: 100 }),
  fc.string({ unit: 'grapheme', maxLength: 40 }),
  fc.uuid().map((id) => `5f0c3c1e-7f5e-4f7e-9a55-0d3b2c1a0e11:${id}`),
);

function args(key: Buffer | string | null, partitions: number, partition?: number): PartitionerArgs {
  return {
    topic: 'missions.requests.v1',
    partitionMetadata: Array.from({ length: partitions }, (_, partitionId) => ({ partitionId, leader: 1, partitionErrorCode: 0, replicas: [1], isr: [1] })),
    message: { key, value: 'v', ...(partition === undefined ? {} : { partition }) },
  };
}

describe('murmur2', () => {
  it('equals kafkajs’s murmur2 for any key: every length modulo four, strings and bytes', () => {
    fc.assert(
      fc.property(keys, (key) => {
        expect(murmur2(key)).toBe(kafkajsMurmur2(key));
      }),
      { numRuns: 3_000 },
    );
    for (const key of ['', 'a', 'ab', 'abc', 'abcd', 'abcde', Buffer.from([0xff, 0xff, 0xff, 0xff, 0x80])]) expect(murmur2(key)).toBe(kafkajsMurmur2(key));
  });

  it('is a signed 32-bit integer', () => {
    fc.assert(
      fc.property(keys, (key) => {
        const hash = murmur2(key);
        expect(Number.isInteger(hash) && hash >= -(2 ** 31) && hash < 2 ** 31).toBe(true);
      }),
    );
  });
});

describe('murmur2Partitioner', () => {
  it('puts every keyed message on the partition kafkajs’s default partitioner chooses', () => {
    const ours = murmur2Partitioner();
    const theirs = Partitioners.DefaultPartitioner();
    fc.assert(
      fc.property(keys, fc.integer({ min: 1, max: 64 }), (key, partitions) => {
        expect(ours(args(key, partitions))).toBe(theirs(args(key, partitions)));
      }),
      { numRuns: 2_000 },
    );
  });

  it('keeps a partition the message names, and spreads messages without a key over the partitions', () => {
    const ours = murmur2Partitioner();
    expect(ours(args('key', 6, 4))).toBe(4);
    const chosen = new Set(Array.from({ length: 60 }, () => ours(args(null, 6))));
    expect([...chosen].sort()).toEqual([0, 1, 2, 3, 4, 5]);
  });
});
