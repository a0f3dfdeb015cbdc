import { EntityManager } from 'typeorm';
import { RecordCipher } from '@mission/persistence';
import { encodeSegment } from '../ranking/postings';
import { assertIndexable, BrainRepository, integerArrayLiteral, writeRanges } from './brain.repository';

describe('integerArrayLiteral', () => {
  it('writes whole numbers as a PostgreSQL array literal, signed 64-bit hashes included', () => {
    expect(integerArrayLiteral([])).toBe('{}');
    expect(integerArrayLiteral([1, 0, -7])).toBe('{1,0,-7}');
    expect(integerArrayLiteral(['-9223372036854775808', '9223372036854775807', '42'])).toBe('{-9223372036854775808,9223372036854775807,42}');
  });

  it('refuses anything that is not a whole number rather than send it', () => {
    for (const bad of ['1,2', '"1"', '1}', '', ' 1', '1.5', 'NULL', '{1}', '1e3']) expect(() => integerArrayLiteral([bad])).toThrow(TypeError);
    for (const bad of [1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 60]) expect(() => integerArrayLiteral([bad])).toThrow(TypeError);
  });
});

describe('assertIndexable', () => {
  const chunk = (hashes: number[], frequencies: number[]) => ({ ordinal: 3, hashes: Int32Array.from(hashes), frequencies: Int32Array.from(frequencies) });

  it('accepts distinct hashes with a frequency of at least one each, however many', () => {
    expect(() => assertIndexable(chunk([], []))).not.toThrow();
    // Hashes that differ in one half only are distinct.
    expect(() => assertIndexable(chunk([0, 1, 1, 0, 0, 2, -1, 1], [1, 2, 3, 4]))).not.toThrow();
    const many = Array.from({ length: 5_000 }, (_, n) => [n % 7, n]).flat();
    expect(() =>
      assertIndexable(
        chunk(
          many,
          Array.from({ length: 5_000 }, () => 1),
        ),
      ),
    ).not.toThrow();
    // After a large chunk, a small one is checked afresh.
    expect(() => assertIndexable(chunk([0, 1, 0, 1], [1, 1]))).toThrow(/lists a term twice/);
  });

  it('refuses a hash listed twice, a frequency below one, and hashes that do not match their frequencies', () => {
    expect(() => assertIndexable(chunk([5, -7, 0, 1, 5, -7], [1, 1, 1]))).toThrow(/Chunk 3 lists a term twice/);
    const many = Array.from({ length: 5_000 }, (_, n) => [n, -n]).flat();
    many.push(4_999, -4_999);
    expect(() =>
      assertIndexable(
        chunk(
          many,
          Array.from({ length: 5_001 }, () => 1),
        ),
      ),
    ).toThrow(/lists a term twice/);
    expect(() => assertIndexable(chunk([0, 1, 0, 2], [1, 0]))).toThrow(/frequency below one/);
    expect(() => assertIndexable(chunk([0, 1, 0, 2], [1, -3]))).toThrow(/frequency below one/);
    expect(() => assertIndexable(chunk([0, 1, 0, 2], [1]))).toThrow(/2 terms and 1 frequencies/);
  });
});

describe('BrainRepository.rank', () => {
  const block = encodeSegment([10, 20, 30], [3, 2, 1], [5, 5, 5]);
  /** A transaction whose winners' read leaves out chunk 10 the first `gone` times (a deletion committed between the statements). */
  const transaction = (gone: number): { manager: EntityManager; winnerReads: () => number } => {
    let reads = 0;
    const manager = {
      query: async (sql: string, params: unknown[]): Promise<unknown[]> => {
        if (sql.includes('FROM brain.posting_blocks')) return [{ term: '7', size: 3, postings: block.toString('base64'), seq: null, tf: null, length: null }];
        if (sql.includes('WITH ORDINALITY AS s(chunk_seq, position)')) {
          reads++;
          const rows = (params[1] as number[]).map((seq, index) => ({
            chunkId: `c${seq}`,
            documentId: 'd',
            sealed: null,
            title: 't',
            text: `text ${seq}`,
            source: null,
            position: String(index + 1),
          }));
          return reads <= gone ? rows.filter((row) => row.chunkId !== 'c10') : rows;
        }
        throw new Error(`Unexpected statement: ${sql}`);
      },
    } as unknown as EntityManager;
    return { manager, winnerReads: () => reads };
  };
  const rank = (manager: EntityManager) =>
    new BrainRepository({} as RecordCipher).rank(manager, 'tenant', [{ termHash: '7', weight: 2, documentFrequency: 3 }], { constant: 0.3, perTerm: 0.01 }, 3);

  it('ranks again once when a winner is gone by the time its text is read', async () => {
    const { manager, winnerReads } = transaction(1);
    expect((await rank(manager)).map((result) => result.chunkId)).toEqual(['c10', 'c20', 'c30']);
    expect(winnerReads()).toBe(2);
  });

  it('answers with what remains when the second try is short too, and reads once when nothing is missing', async () => {
    const short = transaction(2);
    expect((await rank(short.manager)).map((result) => result.chunkId)).toEqual(['c20', 'c30']);
    expect(short.winnerReads()).toBe(2);
    const whole = transaction(0);
    expect((await rank(whole.manager)).map((result) => result.chunkId)).toEqual(['c10', 'c20', 'c30']);
    expect(whole.winnerReads()).toBe(1);
  });
});

describe('writeRanges', () => {
  /** Segments of the given sizes in bytes, as offsets. */
  const segments = (sizes: readonly number[]) => {
    const offsets = new Int32Array(sizes.length + 1);
    sizes.forEach((size, index) => (offsets[index + 1] = (offsets[index] as number) + size));
    return { count: sizes.length, offsets };
  };

  it('cuts at 5,000 segments, and at 2 MiB, a larger segment alone, covering every segment once in order', () => {
    expect([...writeRanges(segments(Array.from({ length: 5_000 }, () => 10)))]).toEqual([[0, 5_000]]);
    expect([...writeRanges(segments(Array.from({ length: 5_001 }, () => 10)))]).toEqual([
      [0, 5_000],
      [5_000, 5_001],
    ]);
    const mebibyte = 1024 * 1024;
    expect([...writeRanges(segments([mebibyte, mebibyte, 1]))]).toEqual([
      [0, 2],
      [2, 3],
    ]);
    expect([...writeRanges(segments([10, 3 * mebibyte, 10]))]).toEqual([
      [0, 1],
      [1, 2],
      [2, 3],
    ]);
    expect([...writeRanges(segments([]))]).toEqual([]);
    const sizes = Array.from({ length: 12_345 }, (_, index) => 1 + ((index * 7919) % 900));
    const ranges = [...writeRanges(segments(sizes))];
    expect(ranges[0]?.[0]).toBe(0);
    expect(ranges[ranges.length - 1]?.[1]).toBe(sizes.length);
    for (const [index, [from, to]] of ranges.entries()) {
      if (index > 0) expect(from).toBe(ranges[index - 1]?.[1]);
      expect(to - from).toBeLessThanOrEqual(5_000);
      expect(sizes.slice(from, to).reduce((sum, size) => sum + size, 0)).toBeLessThanOrEqual(2 * mebibyte);
    }
  });
});
