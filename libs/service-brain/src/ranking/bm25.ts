/**
 * Okapi BM25 (Robertson et al.), as the index applies it per chunk:
 *
 *   score(q, c) = Σ_t∈q  qw(t) · idf(t) · tf(t,c)·(k1 + 1) / (tf(t,c) + k1·(1 − b + b·|c| / avgdl))
 *   idf(t)      = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))
 *   qw(t)       = (k3 + 1)·qtf(t) / (k3 + qtf(t))
 *
 * with N the tenant's chunks, df(t) the chunks containing t, |c| the chunk's length in terms
 * (title included) and avgdl the tenant's average. The idf is Lucene's non-negative form: the
 * classic ln((N − df + 0.5)/(df + 0.5)) turns negative for terms in more than half the chunks,
 * which in a small tenant would rank a passage lower for matching. Repeated query terms saturate
 * (k3) instead of counting linearly, so a query cannot be dominated by repeating a word.
 */
export interface Bm25Parameters {
  readonly k1: number;
  readonly b: number;
  readonly k3: number;
}

/** The usual defaults (Robertson; Terrier and Lucene use the same k1 and b). */
export const BM25_DEFAULTS: Bm25Parameters = { k1: 1.2, b: 0.75, k3: 8 };

export interface CollectionStatistics {
  /** Chunks of the tenant. */
  readonly chunkCount: number;
  /** Sum of the chunks' lengths, in terms. */
  readonly totalLength: number;
}

export function averageLength(stats: CollectionStatistics): number {
  return stats.chunkCount > 0 ? stats.totalLength / stats.chunkCount : 0;
}

export function idf(chunkCount: number, documentFrequency: number): number {
  return Math.log(1 + (chunkCount - documentFrequency + 0.5) / (documentFrequency + 0.5));
}

export function queryTermWeight(queryFrequency: number, parameters: Bm25Parameters = BM25_DEFAULTS): number {
  return ((parameters.k3 + 1) * queryFrequency) / (parameters.k3 + queryFrequency);
}

/**
 * The length normalisation of BM25 as an affine function of the chunk length, so that the
 * database can apply it per posting: K(|c|) = constant + perTerm·|c|.
 */
export function lengthNormalisation(stats: CollectionStatistics, parameters: Bm25Parameters = BM25_DEFAULTS): { constant: number; perTerm: number } {
  const avgdl = averageLength(stats);
  return { constant: parameters.k1 * (1 - parameters.b), perTerm: avgdl > 0 ? (parameters.k1 * parameters.b) / avgdl : 0 };
}

/** The weight a query term's postings are multiplied with: qw(t)·idf(t)·(k1 + 1). */
export function termWeight(queryFrequency: number, chunkCount: number, documentFrequency: number, parameters: Bm25Parameters = BM25_DEFAULTS): number {
  return queryTermWeight(queryFrequency, parameters) * idf(chunkCount, documentFrequency) * (parameters.k1 + 1);
}

/** One term's contribution to a chunk's score. */
export function termScore(weight: number, termFrequency: number, chunkLength: number, normalisation: { constant: number; perTerm: number }): number {
  return (weight * termFrequency) / (termFrequency + normalisation.constant + normalisation.perTerm * chunkLength);
}

export interface ScoredChunk<Id> {
  readonly id: Id;
  readonly score: number;
}

/**
 * BM25 over an in-memory collection: the reference the database ranking is checked against, and
 * the definition in executable form. Chunks are term-frequency maps with their length.
 */
export function rankInMemory<Id>(
  query: ReadonlyMap<string, number>,
  chunks: ReadonlyArray<{ readonly id: Id; readonly terms: ReadonlyMap<string, number>; readonly length: number }>,
  parameters: Bm25Parameters = BM25_DEFAULTS,
): Array<ScoredChunk<Id>> {
  const stats = { chunkCount: chunks.length, totalLength: chunks.reduce((sum, chunk) => sum + chunk.length, 0) };
  const normalisation = lengthNormalisation(stats, parameters);
  const weights = new Map<string, number>();
  for (const [term, queryFrequency] of query) {
    const df = chunks.filter((chunk) => chunk.terms.has(term)).length;
    if (df > 0) weights.set(term, termWeight(queryFrequency, stats.chunkCount, df, parameters));
  }
  const scored: Array<ScoredChunk<Id>> = [];
  for (const chunk of chunks) {
    let score = 0;
    let matched = false;
    for (const [term, weight] of weights) {
      const tf = chunk.terms.get(term);
      if (tf === undefined) continue;
      matched = true;
      score += termScore(weight, tf, chunk.length, normalisation);
    }
    if (matched) scored.push({ id: chunk.id, score });
  }
  return scored.sort((a, b) => b.score - a.score);
}
