/**
 * Retrieval metrics with trec_eval's semantics: binary relevance from the judgements, documents
 * without a judgement count as non-relevant, the ideal ranking is built from all relevant
 * judgements of the query, and a query without any retrieved document scores 0.
 */

export interface ScoredDocument {
  readonly docno: string;
  readonly score: number;
}

/** Relevant document numbers by query id. */
export type Qrels = ReadonlyMap<string, ReadonlySet<string>>;

/**
 * The order trec_eval evaluates a run in: by score, highest first, ties broken by document
 * number in descending string order (it ignores the rank column of the run file).
 */
export function trecOrder(run: readonly ScoredDocument[]): string[] {
  return [...run].sort((a, b) => b.score - a.score || (a.docno < b.docno ? 1 : a.docno > b.docno ? -1 : 0)).map((doc) => doc.docno);
}

/** Average precision: the mean, over all relevant documents, of the precision at the rank each is retrieved (0 if not retrieved). */
export function averagePrecision(ranking: readonly string[], relevant: ReadonlySet<string>): number {
  if (relevant.size === 0) return 0;
  let hits = 0;
  let sum = 0;
  ranking.forEach((docno, index) => {
    if (!relevant.has(docno)) return;
    hits += 1;
    sum += hits / (index + 1);
  });
  return sum / relevant.size;
}

function dcg(gains: readonly number[]): number {
  return gains.reduce((sum, gain, index) => sum + gain / Math.log2(index + 2), 0);
}

/**
 * Normalised discounted cumulative gain, gain/log2(rank + 1), with binary gains; without a
 * cut-off the whole ranking counts and the ideal ranking holds every relevant document.
 */
export function ndcg(ranking: readonly string[], relevant: ReadonlySet<string>, cutoff = Number.POSITIVE_INFINITY): number {
  const depth = Math.min(ranking.length, cutoff);
  const ideal = dcg(Array.from({ length: Math.min(relevant.size, cutoff) }, () => 1));
  if (ideal === 0) return 0;
  return dcg(ranking.slice(0, depth).map((docno) => (relevant.has(docno) ? 1 : 0))) / ideal;
}

export interface RunMetrics {
  readonly map: number;
  readonly ndcg: number;
  readonly ndcgAt10: number;
  readonly queries: number;
}

export interface QueryMetrics {
  readonly averagePrecision: number;
  readonly ndcg: number;
  readonly ndcgAt10: number;
}

/** Each judged query's metrics (trec_eval -q -c): a query the run does not answer scores 0. */
export function perQueryMetrics(run: ReadonlyMap<string, readonly ScoredDocument[]>, qrels: Qrels): Map<string, QueryMetrics> {
  const metrics = new Map<string, QueryMetrics>();
  for (const [qid, relevant] of qrels) {
    const ranking = trecOrder(run.get(qid) ?? []);
    metrics.set(qid, { averagePrecision: averagePrecision(ranking, relevant), ndcg: ndcg(ranking, relevant), ndcgAt10: ndcg(ranking, relevant, 10) });
  }
  return metrics;
}

/** Means of per-query metrics. */
export function meanMetrics(perQuery: ReadonlyMap<string, QueryMetrics>): RunMetrics {
  const queries = [...perQuery.values()];
  const mean = (pick: (query: QueryMetrics) => number): number => queries.reduce((sum, query) => sum + pick(query), 0) / queries.length;
  return { map: mean((query) => query.averagePrecision), ndcg: mean((query) => query.ndcg), ndcgAt10: mean((query) => query.ndcgAt10), queries: queries.length };
}

/** Means over every judged query (trec_eval -c). */
export function evaluateRun(run: ReadonlyMap<string, readonly ScoredDocument[]>, qrels: Qrels): RunMetrics {
  return meanMetrics(perQueryMetrics(run, qrels));
}
