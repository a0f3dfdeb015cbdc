import { averagePrecision, evaluateRun, ndcg, perQueryMetrics, trecOrder } from './trec-metrics';

/** Ranking d1..d5; relevant d1, d3 and d6 (never retrieved). */
const ranking = ['d1', 'd2', 'd3', 'd4', 'd5'];
const relevant = new Set(['d1', 'd3', 'd6']);

describe('trec_eval metrics, checked by hand', () => {
  it('average precision: (1/1 + 2/3) / 3, the unretrieved relevant document counting 0', () => {
    expect(averagePrecision(ranking, relevant)).toBeCloseTo((1 + 2 / 3) / 3, 12); // 0.5556
    expect(averagePrecision(['d6', 'd3', 'd1'], relevant)).toBe(1);
    expect(averagePrecision([], relevant)).toBe(0);
    expect(averagePrecision(['x', 'y', 'd1'], new Set(['d1']))).toBeCloseTo(1 / 3, 12);
  });

  it('nDCG without cut-off: (1 + 1/log2 4) / (1 + 1/log2 3 + 1/log2 4)', () => {
    const ideal = 1 + 1 / Math.log2(3) + 0.5; // 2.1309
    expect(ndcg(ranking, relevant)).toBeCloseTo(1.5 / ideal, 12); // 0.7039
    expect(ndcg(['d1', 'd3', 'd6'], relevant)).toBeCloseTo(1, 12);
    expect(ndcg(['x'], relevant)).toBe(0);
  });

  it('nDCG@2 truncates both the ranking and the ideal: 1 / (1 + 1/log2 3)', () => {
    expect(ndcg(ranking, relevant, 2)).toBeCloseTo(1 / (1 + 1 / Math.log2(3)), 12); // 0.6131
    expect(ndcg(['x', 'd1'], new Set(['d1']), 1)).toBe(0);
  });

  it('orders a run like trec_eval: score descending, ties by document number descending', () => {
    expect(
      trecOrder([
        { docno: 'a', score: 1 },
        { docno: 'c', score: 0.5 },
        { docno: 'b', score: 1 },
      ]),
    ).toEqual(['b', 'a', 'c']);
  });

  it('averages over every judged query, an unanswered query counting 0', () => {
    const qrels = new Map([
      ['1', new Set(['a'])],
      ['2', new Set(['b', 'c'])],
      ['3', new Set(['z'])],
    ]);
    const run = new Map([
      ['1', [{ docno: 'a', score: 3 }]],
      [
        '2',
        [
          { docno: 'x', score: 2 },
          { docno: 'c', score: 1 },
        ],
      ],
    ]);
    const metrics = evaluateRun(run, qrels);
    // AP: q1 = 1, q2 = (1/2)/2 = 0.25, q3 = 0.
    expect(metrics.map).toBeCloseTo((1 + 0.25 + 0) / 3, 12);
    // nDCG: q1 = 1, q2 = (1/log2 3)/(1 + 1/log2 3), q3 = 0.
    const q2 = 1 / Math.log2(3) / (1 + 1 / Math.log2(3));
    expect(metrics.ndcg).toBeCloseTo((1 + q2) / 3, 12);
    expect(metrics.ndcgAt10).toBeCloseTo((1 + q2) / 3, 12);
    expect(metrics.queries).toBe(3);
    const byQuery = perQueryMetrics(run, qrels);
    expect([...byQuery.keys()]).toEqual(['1', '2', '3']);
    expect(byQuery.get('2')?.averagePrecision).toBeCloseTo(0.25, 12);
    expect(byQuery.get('2')?.ndcg).toBeCloseTo(q2, 12);
    expect(byQuery.get('3')).toEqual({ averagePrecision: 0, ndcg: 0, ndcgAt10: 0 });
  });
});
