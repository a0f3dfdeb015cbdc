import { EntityManager } from 'typeorm';
import { RecordCipher } from '@mission/persistence';
import { encodeSegment } from '../ranking/postings';
import { BrainRepository, integerArrayLiteral } from './brain.repository';

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
