import { BM25_DEFAULTS, idf, lengthNormalisation, queryTermWeight, rankInMemory, termScore, termWeight } from './bm25';

/**
 * Three chunks, N = 3, total length 9, avgdl = 3; k1 = 1.2, b = 0.75, so
 * K(|c|) = 1.2·(0.25 + 0.75·|c|/3) = 0.3 + 0.3·|c|.
 *   c1 = {a: 2, b: 1}, |c1| = 3      c2 = {a: 1, c: 1}, |c2| = 2      c3 = {b: 1, c: 3}, |c3| = 4
 * df(a) = df(b) = df(c) = 2, so idf = ln(1 + (3 − 2 + 0.5)/(2 + 0.5)) = ln 1.6 = 0.470003629…
 */
const chunks = [
  {
    id: 'c1',
    terms: new Map([
      ['a', 2],
      ['b', 1],
    ]),
    length: 3,
  },
  {
    id: 'c2',
    terms: new Map([
      ['a', 1],
      ['c', 1],
    ]),
    length: 2,
  },
  {
    id: 'c3',
    terms: new Map([
      ['b', 1],
      ['c', 3],
    ]),
    length: 4,
  },
];
const LN_1_6 = 0.47000362924573563;

describe('BM25', () => {
  it('computes the non-negative idf by hand', () => {
    expect(idf(3, 2)).toBeCloseTo(LN_1_6, 15);
    // A term in every chunk still weighs a little (the classic form would be negative here).
    expect(idf(3, 3)).toBeCloseTo(Math.log(1 + 0.5 / 3.5), 15);
    expect(idf(3, 3)).toBeGreaterThan(0);
    // Rarer terms weigh more.
    expect(idf(1000, 1)).toBeGreaterThan(idf(1000, 10));
  });

  it('saturates repeated query terms with k3 = 8: 1, then 9·2/10', () => {
    expect(queryTermWeight(1)).toBe(1);
    expect(queryTermWeight(2)).toBeCloseTo(1.8, 15);
    expect(queryTermWeight(1000)).toBeLessThan(9);
  });

  it('normalises by length as an affine function: K(|c|) = 0.3 + 0.3·|c| for avgdl 3', () => {
    const normalisation = lengthNormalisation({ chunkCount: 3, totalLength: 9 });
    expect(normalisation.constant).toBeCloseTo(0.3, 15);
    expect(normalisation.perTerm).toBeCloseTo(0.3, 15);
    expect(lengthNormalisation({ chunkCount: 0, totalLength: 0 })).toEqual({ constant: expect.any(Number), perTerm: 0 });
  });

  it('scores one term: idf·tf·(k1+1)/(tf + K(|c|))', () => {
    const normalisation = lengthNormalisation({ chunkCount: 3, totalLength: 9 });
    const weight = termWeight(1, 3, 2);
    expect(weight).toBeCloseTo(LN_1_6 * 2.2, 14);
    // c1: 2·2.2/(2 + 1.2) = 1.375;  c2: 2.2/(1 + 0.9);  c3 (tf 3): 3·2.2/(3 + 1.5)
    expect(termScore(weight, 2, 3, normalisation)).toBeCloseTo(0.6462549902128865, 14);
    expect(termScore(weight, 1, 2, normalisation)).toBeCloseTo(0.5442147286003255, 14);
    expect(termScore(weight, 3, 4, normalisation)).toBeCloseTo(0.6893386562270789, 14);
  });

  it('ranks a single-term query by term frequency against length', () => {
    const ranked = rankInMemory(new Map([['a', 1]]), chunks);
    expect(ranked.map((chunk) => chunk.id)).toEqual(['c1', 'c2']);
    expect(ranked[0]?.score).toBeCloseTo(0.6462549902128865, 14);
    expect(ranked[1]?.score).toBeCloseTo(0.5442147286003255, 14);
  });

  it('sums the terms of a query and leaves out chunks that match none', () => {
    const ranked = rankInMemory(
      new Map([
        ['a', 1],
        ['c', 1],
      ]),
      chunks,
    );
    expect(ranked.map((chunk) => chunk.id)).toEqual(['c2', 'c3', 'c1']);
    expect(ranked[0]?.score).toBeCloseTo(1.088429457200651, 14);
    expect(ranked[1]?.score).toBeCloseTo(0.6893386562270789, 14);
    expect(ranked[2]?.score).toBeCloseTo(0.6462549902128865, 14);
    expect(rankInMemory(new Map([['zzz', 1]]), chunks)).toEqual([]);
  });

  it('uses k1 = 1.2 and b = 0.75 by default', () => {
    expect(BM25_DEFAULTS).toMatchObject({ k1: 1.2, b: 0.75 });
  });
});
