/**
 * Exact top-k pruning for BM25 over postings (the "max-score" idea of Turtle and Flood): a term's
 * contribution to any chunk is below its weight, because tf / (tf + k1·(1 − b) + k1·b·|c|/avgdl)
 * is below 1. Split the query's terms into the essential ones and the rest, whose weights sum to
 * `bound`. A chunk holding none of the essential terms scores at most `bound`. So when the k-th
 * best score among the chunks holding an essential term, each scored in full (every query term
 * it holds), is above `bound`, those k are the top k of the whole tenant: the long posting lists
 * of common words need not be read, only looked up in the candidates' own term lists. The ranking is the same as
 * scoring every posting, score for score and tie for tie; when the check fails the caller ranks
 * in full.
 */

export interface WeightedTerm {
  readonly termHash: string;
  readonly weight: number;
  /** Chunks holding the term: the length of its posting list. */
  readonly documentFrequency: number;
}

export interface PruningPlan {
  /** Terms whose postings are all read: a chunk must hold one of them to be a candidate. */
  readonly essential: WeightedTerm[];
  /** Terms only probed for the candidates. */
  readonly rest: WeightedTerm[];
  /** The most a chunk holding only `rest` terms can score (as the database rounds, plus a margin). */
  readonly bound: number;
}

export interface PruningOptions {
  /** Prune only when the skipped posting lists hold at least this many postings (below, ranking in full is cheap). */
  readonly minSkippedPostings: number;
  /**
   * What completing one candidate costs (reading its row and looking the skipped terms up in its
   * list of terms), in postings read from a list: prune only when completing the candidates costs
   * less than reading the skipped lists.
   */
  readonly probeCost: number;
  /** Skip terms while their bound stays below this share of the strongest essential term's weight. */
  readonly maxBoundShare: number;
}

/**
 * A chunk matching one essential term with tf 1 at average length scores its weight · 1/(1 + k1)
 * ≈ 0.45 of it (k1 = 1.2): skipping terms worth together more than about that would mostly fail
 * the check, at the price of a second query. Measured on 100k chunks: a posting read from a block
 * and summed costs about 0.1 µs, completing a candidate (its row fetched, its term list searched)
 * 6 to 13 µs, so a candidate costs about 80 postings, and lists shorter than 20,000 postings
 * (2 ms) are read whole.
 */
export const DEFAULT_PRUNING: PruningOptions = { minSkippedPostings: 20_000, maxBoundShare: 0.4, probeCost: 80 };

/** A term's largest contribution as the database sums it: rounded to 1e-9, plus 1e-9 for safety. */
export function contributionBound(weight: number): number {
  return (Math.round(weight * 1e9) + 1) / 1e9;
}

/**
 * Which terms to skip for a query ranked to `limit` results, or undefined when ranking in full
 * is the better plan: the lightest terms go first (the most common ones: the lowest idf), while
 * their bound stays under `maxBoundShare` of the heaviest term's weight and at least one term stays
 * essential; worth it only when the skipped lists are long, completing every candidate costs less
 * than reading them, and the essential lists can fill `limit`.
 */
export function planPruning(terms: readonly WeightedTerm[], limit: number, options: PruningOptions = DEFAULT_PRUNING): PruningPlan | undefined {
  if (terms.length < 2) return undefined;
  const lightestFirst = [...terms].sort((a, b) => a.weight - b.weight || b.documentFrequency - a.documentFrequency);
  const heaviest = lightestFirst[lightestFirst.length - 1].weight;
  let skipped = 0;
  let bound = 0;
  while (skipped < lightestFirst.length - 1) {
    const next = bound + contributionBound(lightestFirst[skipped].weight);
    if (next > options.maxBoundShare * heaviest) break;
    bound = next;
    skipped++;
  }
  if (skipped === 0) return undefined;
  const rest = lightestFirst.slice(0, skipped);
  const essential = lightestFirst.slice(skipped);
  const skippedPostings = rest.reduce((sum, term) => sum + term.documentFrequency, 0);
  const candidates = essential.reduce((sum, term) => sum + term.documentFrequency, 0);
  if (skippedPostings < options.minSkippedPostings || candidates < limit || candidates * options.probeCost > skippedPostings) return undefined;
  return { essential, rest, bound };
}

/**
 * Whether a pruned ranking is the whole ranking: it filled `limit`, and its last score is above
 * what any chunk outside the candidates can score. (Scores strictly above the bound: a chunk
 * outside with the same score could otherwise win the tie.)
 */
export function prunedRankingIsExact(scores: readonly number[], limit: number, plan: PruningPlan): boolean {
  return scores.length >= limit && scores[limit - 1] > plan.bound + 1e-9;
}
