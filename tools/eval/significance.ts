import { seededRandom } from '../../test/support/seeded-random';

/**
 * The paired randomisation (sign-flip) test IR evaluations use to compare two systems on the same
 * queries (Smucker, Allan and Carterette, CIKM 2007): under the null hypothesis either system
 * could have produced either score of a query, so every per-query difference may flip its sign.
 * The p-value is the share of sign assignments whose mean difference is at least as far from
 * zero as the observed one (two-sided).
 */
export interface PairedTest {
  /** Mean of `b − a` over the queries. */
  readonly meanDifference: number;
  readonly p: number;
  /** Queries where b scored higher, lower, the same. */
  readonly better: number;
  readonly worse: number;
  readonly tied: number;
  /** True when every sign assignment was counted (few queries), false when they were sampled. */
  readonly exact: boolean;
}

/** Up to this many non-zero differences every sign assignment (2^n) is enumerated. */
const EXACT_LIMIT = 16;

export interface PairedTestOptions {
  /** Sign assignments sampled when there are too many to enumerate (default 100,000). */
  readonly permutations?: number;
  readonly seed?: number;
  /** Enumerate every assignment up to this many non-zero differences (default 16; at most 24). */
  readonly exactLimit?: number;
}

export function pairedRandomizationTest(a: readonly number[], b: readonly number[], options: PairedTestOptions = {}): PairedTest {
  if (a.length !== b.length || a.length === 0) throw new Error('A paired test needs the same, non-zero number of scores on both sides');
  const differences = a.map((score, index) => (b[index] as number) - score);
  const better = differences.filter((difference) => difference > 0).length;
  const worse = differences.filter((difference) => difference < 0).length;
  const observed = Math.abs(differences.reduce((sum, difference) => sum + difference, 0));
  const summary = { meanDifference: differences.reduce((sum, difference) => sum + difference, 0) / differences.length, better, worse, tied: differences.length - better - worse };
  // Zero differences contribute nothing whatever their sign; a tolerance absorbs float summation order.
  const moving = differences.filter((difference) => difference !== 0);
  const tolerance = 1e-12 * Math.max(1, observed);
  if (moving.length <= Math.min(options.exactLimit ?? EXACT_LIMIT, 24)) {
    let atLeast = 0;
    const assignments = 2 ** moving.length;
    for (let mask = 0; mask < assignments; mask += 1) {
      let sum = 0;
      moving.forEach((difference, index) => {
        sum += mask & (1 << index) ? -difference : difference;
      });
      if (Math.abs(sum) >= observed - tolerance) atLeast += 1;
    }
    return { ...summary, p: atLeast / assignments, exact: true };
  }
  const permutations = options.permutations ?? 100_000;
  const random = seededRandom(options.seed ?? 1);
  let atLeast = 0;
  for (let round = 0; round < permutations; round += 1) {
    let sum = 0;
    for (const difference of moving) sum += random() < 0.5 ? -difference : difference;
    if (Math.abs(sum) >= observed - tolerance) atLeast += 1;
  }
  // The observed assignment is one of the possible ones: (k + 1) / (n + 1) never claims p = 0.
  return { ...summary, p: (atLeast + 1) / (permutations + 1), exact: false };
}
