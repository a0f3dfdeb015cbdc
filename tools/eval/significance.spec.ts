import { pairedRandomizationTest } from './significance';

describe('paired randomisation test', () => {
  it('enumerates every sign assignment of few differences: three equal gains give p = 2/8', () => {
    // Of the 8 sign assignments of (+1, +1, +1) only all-plus and all-minus reach |sum| = 3.
    const test = pairedRandomizationTest([0, 0, 0], [1, 1, 1]);
    expect(test).toEqual({ meanDifference: 1, p: 0.25, better: 3, worse: 0, tied: 0, exact: true });
  });

  it('counts the assignments at least as extreme on both sides (two-sided)', () => {
    // Differences (3, 1): the sums of ±3 ±1 are 4, 2, -2, -4; only 4 and -4 reach the observed 4.
    expect(pairedRandomizationTest([0, 0], [3, 1]).p).toBe(0.5);
    // Differences (2, -1): the sums are 3, 1, -1, -3; all four reach the observed |1|.
    expect(pairedRandomizationTest([0, 1], [2, 0]).p).toBe(1);
  });

  it('is symmetric: a loss is as significant as the same gain', () => {
    const a = [0.2, 0.4, 0.1, 0.5, 0.3];
    const b = [0.3, 0.6, 0.2, 0.45, 0.5];
    const gain = pairedRandomizationTest(a, b);
    const loss = pairedRandomizationTest(b, a);
    expect(loss.meanDifference).toBeCloseTo(-gain.meanDifference, 15);
    expect(loss.p).toBe(gain.p);
    expect({ better: loss.better, worse: loss.worse }).toEqual({ better: gain.worse, worse: gain.better });
    // Differences 0.1, 0.2, 0.1, -0.05, 0.2 (sum 0.55): of the 32 sign assignments, the observed one, the one
    // with -0.05 flipped (0.65) and the mirrors of both reach |0.55|.
    expect(gain.p).toBe(4 / 32);
  });

  it('samples to within its sampling error of the exact p-value', () => {
    const a = Array.from({ length: 18 }, (_, index) => (index % 5) / 10);
    const b = a.map((score, index) => score + ((index * 7) % 11) / 100 - 0.03);
    const exact = pairedRandomizationTest(a, b, { exactLimit: 18 });
    const sampled = pairedRandomizationTest(a, b, { permutations: 40_000, seed: 3 });
    expect(exact.exact).toBe(true);
    expect(sampled.exact).toBe(false);
    expect(exact.p).toBeGreaterThan(0.001);
    expect(exact.p).toBeLessThan(0.5);
    // Four standard errors of a proportion estimated from 40,000 draws.
    expect(Math.abs(sampled.p - exact.p)).toBeLessThan(4 * Math.sqrt((exact.p * (1 - exact.p)) / 40_000));
    const reversed = pairedRandomizationTest(b, a, { permutations: 40_000, seed: 3 });
    expect(reversed.p).toBeCloseTo(sampled.p, 12);
  });

  it('ignores tied queries and gives p = 1 when the systems never differ', () => {
    const test = pairedRandomizationTest([0.3, 0.5, 0.7], [0.3, 0.5, 0.7]);
    expect(test.p).toBe(1);
    expect(test.tied).toBe(3);
    expect(test.meanDifference).toBe(0);
  });

  it('samples sign assignments for many queries, reproducibly, and finds a consistent gain significant', () => {
    const a = Array.from({ length: 60 }, (_, index) => (index % 7) / 10);
    const consistent = a.map((score, index) => score + 0.02 + (index % 3) * 0.001);
    const test = pairedRandomizationTest(a, consistent, { permutations: 20_000, seed: 7 });
    expect(test.exact).toBe(false);
    expect(test.p).toBeLessThan(0.001);
    expect(test.p).toBeGreaterThan(0);
    expect(pairedRandomizationTest(a, consistent, { permutations: 20_000, seed: 7 })).toEqual(test);
  });

  it('finds no evidence in differences that cancel out', () => {
    const a = Array.from({ length: 40 }, () => 0.5);
    const noise = a.map((score, index) => score + (index % 2 === 0 ? 0.1 : -0.1));
    expect(pairedRandomizationTest(a, noise, { permutations: 20_000 }).p).toBe(1);
  });

  it('refuses unpaired input', () => {
    expect(() => pairedRandomizationTest([1], [1, 2])).toThrow('same');
    expect(() => pairedRandomizationTest([], [])).toThrow('non-zero');
  });
});
