import fc from 'fast-check';
import { contributionBound, planPruning, prunedRankingIsExact, type WeightedTerm } from './pruning';

const term = (termHash: string, weight: number, documentFrequency: number): WeightedTerm => ({ termHash, weight, documentFrequency });
const options = { minSkippedPostings: 1_000, maxBoundShare: 0.4, probeCost: 4 };

describe('planPruning', () => {
  it('skips the common, light terms of a query that also holds a heavy one, with the bound of what they can add', () => {
    const plan = planPruning([term('rare', 10, 40), term('common', 1.5, 40_000), term('commoner', 1.2, 60_000)], 10, options);
    expect(plan?.essential.map((t) => t.termHash)).toEqual(['rare']);
    expect(plan?.rest.map((t) => t.termHash)).toEqual(['commoner', 'common']);
    expect(plan?.bound).toBeCloseTo(2.7, 8);
    expect(plan?.bound).toBeGreaterThan(2.7);
  });

  it('keeps a term essential once the skipped ones would be worth too much, and always keeps one', () => {
    expect(planPruning([term('a', 10, 40), term('b', 3.5, 4_000), term('c', 1, 60_000)], 10, options)?.rest.map((t) => t.termHash)).toEqual(['c']);
    expect(planPruning([term('a', 1, 40_000), term('b', 1, 40_000)], 10, options)).toBeUndefined();
    expect(planPruning([term('only', 1, 90_000)], 10, options)).toBeUndefined();
  });

  it('ranks in full when the skipped lists are short, probing them would cost more, or the essential ones cannot fill the page', () => {
    expect(planPruning([term('rare', 10, 40), term('common', 1, 500)], 10, options)).toBeUndefined();
    expect(planPruning([term('rare', 10, 4), term('common', 1, 50_000)], 10, options)).toBeUndefined();
    expect(planPruning([term('rare', 10, 12_000), term('common', 1, 40_000)], 10, options)).toBeUndefined();
    expect(planPruning([term('rare', 10, 9_000), term('common', 1, 40_000)], 10, options)?.rest).toHaveLength(1);
  });

  it('bounds every term by more than it can contribute once rounded to 1e-9 (the database rounds half to even, never above)', () => {
    fc.assert(
      fc.property(fc.double({ min: 0, max: 100, noNaN: true }), fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), (weight, saturation) => {
        expect(Math.round(weight * saturation * 1e9) / 1e9).toBeLessThan(contributionBound(weight));
      }),
    );
  });
});

describe('prunedRankingIsExact', () => {
  const plan = { essential: [term('rare', 10, 40)], rest: [term('common', 1, 40_000)], bound: 1.000000001 };

  it('accepts a full page whose last score is above the bound, and nothing else', () => {
    expect(prunedRankingIsExact([5, 4, 3], 3, plan)).toBe(true);
    expect(prunedRankingIsExact([5, 4], 3, plan)).toBe(false);
    expect(prunedRankingIsExact([5, 4, 1.000000001], 3, plan)).toBe(false);
    expect(prunedRankingIsExact([5, 4, 0.5], 3, plan)).toBe(false);
  });
});
