/**
 * `npm run eval:brain:ablation`: what one analysis or ranking choice is worth on Vaswani.
 *
 * Builds the Brain's index in memory (the service's analyzer and BM25 functions; each document
 * one passage with its number as title, as `eval:brain` loads it) and ranks every query 1000
 * deep twice: with the service's configuration (the baseline) and with the variant the options
 * describe. Reports both runs' MAP, nDCG and nDCG@10 and, per metric, the paired randomisation
 * test of the difference over the 93 queries. The baseline reproduces `eval:brain`'s depth-1000
 * figures (3 of the 11,429 abstracts are longer than one passage there; they move nDCG by 0.0001).
 *
 * Options:
 *   --stopwords=FILE   the variant's stop words (whitespace-separated; `#` starts a comment)
 *   --idf=rsj          the variant's idf: Robertson–Spärck Jones ln((N − df + 0.5)/(df + 0.5))
 *                      instead of the service's non-negative ln(1 + (N − df + 0.5)/(df + 0.5))
 *   --feedback=bo1     the variant expands each query by pseudo-relevance feedback, Terrier's
 *                      defaults: Bo1 term weights, 3 feedback documents, 10 terms, a term in at
 *                      least 2 of them
 *   --json             machine output
 */
import { readFileSync } from 'node:fs';
import { analyze, BM25_DEFAULTS, ENGLISH_STOPWORDS, idf, lengthNormalisation, normalizeText, queryTermWeight, termFrequencies, termScore } from '@mission/service-brain';
import { pairedRandomizationTest, PairedTest } from './significance';
import { meanMetrics, perQueryMetrics, QueryMetrics, RunMetrics, ScoredDocument } from './trec-metrics';
import { Collection, loadCollection, PUBLISHED_BM25 } from './vaswani';

const DEPTH = 1000;
const FEEDBACK = { documents: 3, terms: 10, minimumDocuments: 2 } as const;

interface Configuration {
  readonly stopwords: ReadonlySet<string>;
  readonly stopwordsLabel: string;
  readonly idf: 'non-negative' | 'rsj';
  readonly feedback: boolean;
}

interface IndexedDocument {
  readonly docno: string;
  readonly terms: ReadonlyMap<string, number>;
  readonly length: number;
}

class MemoryIndex {
  readonly documents: IndexedDocument[];
  private readonly postings = new Map<string, number[]>();
  private readonly collectionFrequency = new Map<string, number>();
  private readonly totalLength: number;

  constructor(
    collection: Collection,
    private readonly configuration: Configuration,
  ) {
    this.documents = collection.documents.map((document) => {
      const terms = [...analyze(document.text, configuration.stopwords), ...analyze(document.docno, configuration.stopwords)];
      return { docno: document.docno, terms: termFrequencies(terms), length: terms.length };
    });
    this.documents.forEach((document, index) => {
      for (const [term, frequency] of document.terms) {
        let list = this.postings.get(term);
        if (!list) this.postings.set(term, (list = []));
        list.push(index);
        this.collectionFrequency.set(term, (this.collectionFrequency.get(term) ?? 0) + frequency);
      }
    });
    this.totalLength = this.documents.reduce((sum, document) => sum + document.length, 0);
  }

  /** The service's idf, or the Robertson–Spärck Jones form, which goes negative above half the documents. */
  private idf(term: string): number {
    const n = this.documents.length;
    const df = this.postings.get(term)?.length ?? 0;
    return this.configuration.idf === 'rsj' ? Math.log((n - df + 0.5) / (df + 0.5)) : idf(n, df);
  }

  /** BM25 as the service scores it, for query terms weighted by (saturated) query frequency. */
  rank(queryWeights: ReadonlyMap<string, number>): Array<{ index: number; score: number }> {
    const normalisation = lengthNormalisation({ chunkCount: this.documents.length, totalLength: this.totalLength });
    const scores = new Map<number, number>();
    for (const [term, queryFrequency] of queryWeights) {
      const list = this.postings.get(term);
      if (!list) continue;
      const weight = queryTermWeight(queryFrequency) * this.idf(term) * (BM25_DEFAULTS.k1 + 1);
      for (const index of list) {
        const document = this.documents[index] as IndexedDocument;
        scores.set(index, (scores.get(index) ?? 0) + termScore(weight, document.terms.get(term) ?? 0, document.length, normalisation));
      }
    }
    return [...scores].map(([index, score]) => ({ index, score })).sort((a, b) => b.score - a.score || a.index - b.index);
  }

  /**
   * Bo1 (Amati): a feedback term's weight is tfx·log2((1 + Pn)/Pn) + log2(1 + Pn), with tfx its
   * frequency in the feedback documents and Pn its collection frequency over the number of
   * documents. The expanded query weights each term qtf/max qtf + w/max w, as Terrier does.
   */
  expand(query: ReadonlyMap<string, number>, firstPass: ReadonlyArray<{ index: number }>): Map<string, number> {
    const inFeedback = new Map<string, { frequency: number; documents: number }>();
    for (const { index } of firstPass.slice(0, FEEDBACK.documents)) {
      for (const [term, frequency] of (this.documents[index] as IndexedDocument).terms) {
        const seen = inFeedback.get(term) ?? { frequency: 0, documents: 0 };
        inFeedback.set(term, { frequency: seen.frequency + frequency, documents: seen.documents + 1 });
      }
    }
    const weighted = [...inFeedback]
      .filter(([, seen]) => seen.documents >= FEEDBACK.minimumDocuments)
      .map(([term, seen]) => {
        const pn = (this.collectionFrequency.get(term) ?? 0) / this.documents.length;
        return { term, weight: seen.frequency * Math.log2((1 + pn) / pn) + Math.log2(1 + pn) };
      })
      .sort((a, b) => b.weight - a.weight || (a.term < b.term ? -1 : 1))
      .slice(0, FEEDBACK.terms);
    const maxQuery = Math.max(...query.values());
    const maxWeight = weighted[0]?.weight ?? 1;
    const expanded = new Map<string, number>();
    for (const [term, frequency] of query) expanded.set(term, frequency / maxQuery);
    for (const { term, weight } of weighted) expanded.set(term, (expanded.get(term) ?? 0) + weight / maxWeight);
    return expanded;
  }

  run(text: string): ScoredDocument[] {
    const query = termFrequencies(analyze(text, this.configuration.stopwords));
    let ranked = this.rank(query);
    if (this.configuration.feedback && ranked.length > 0) ranked = this.rank(this.expand(query, ranked));
    return ranked.slice(0, DEPTH).map(({ index, score }) => ({ docno: (this.documents[index] as IndexedDocument).docno, score }));
  }
}

function describe(configuration: Configuration): string {
  return [
    `stop words: ${configuration.stopwordsLabel} (${configuration.stopwords.size})`,
    configuration.idf === 'rsj' ? 'idf ln((N − df + 0.5)/(df + 0.5))' : 'idf ln(1 + (N − df + 0.5)/(df + 0.5))',
    ...(configuration.feedback ? ['Bo1 feedback (3 documents, 10 terms)'] : []),
  ].join(', ');
}

function option(name: string): string | undefined {
  const prefix = `--${name}=`;
  return process.argv.find((argument) => argument.startsWith(prefix))?.slice(prefix.length);
}

function readStopwords(file: string): Set<string> {
  const words = readFileSync(file, 'utf8')
    .split('\n')
    .map((line) => line.replace(/#.*/, ''))
    .join(' ')
    .split(/\s+/)
    .filter(Boolean)
    .map(normalizeText);
  if (words.length === 0) throw new Error(`${file} holds no stop words`);
  return new Set(words);
}

function measure(collection: Collection, configuration: Configuration): Map<string, QueryMetrics> {
  const index = new MemoryIndex(collection, configuration);
  const run = new Map(collection.queries.map((query) => [query.qid, index.run(query.text)]));
  return perQueryMetrics(run, collection.qrels);
}

function main(): void {
  const unknown = process.argv.slice(2).filter((argument) => !/^--(stopwords|idf|feedback)=/.test(argument) && argument !== '--json');
  const idfForm = option('idf');
  const feedback = option('feedback');
  const stopwordsFile = option('stopwords');
  const invalid = unknown.length > 0 || (idfForm !== undefined && idfForm !== 'rsj') || (feedback !== undefined && feedback !== 'bo1') || stopwordsFile === '';
  if (invalid || (idfForm === undefined && feedback === undefined && stopwordsFile === undefined)) {
    throw new Error(
      `Usage: eval:brain:ablation [--stopwords=FILE] [--idf=rsj] [--feedback=bo1] [--json], at least one change (got: ${process.argv.slice(2).join(' ') || 'nothing'})`,
    );
  }
  const baseline: Configuration = { stopwords: ENGLISH_STOPWORDS, stopwordsLabel: 'Snowball English', idf: 'non-negative', feedback: false };
  const variant: Configuration = {
    stopwords: stopwordsFile ? readStopwords(stopwordsFile) : baseline.stopwords,
    stopwordsLabel: stopwordsFile ?? baseline.stopwordsLabel,
    idf: idfForm === 'rsj' ? 'rsj' : baseline.idf,
    feedback: feedback === 'bo1',
  };

  const collection = loadCollection();
  const before = measure(collection, baseline);
  const after = measure(collection, variant);
  const qids = [...collection.qrels.keys()];
  const test = (pick: (query: QueryMetrics) => number): PairedTest =>
    pairedRandomizationTest(
      qids.map((qid) => pick(before.get(qid) as QueryMetrics)),
      qids.map((qid) => pick(after.get(qid) as QueryMetrics)),
    );
  const report = {
    baseline: { configuration: describe(baseline), ...meanMetrics(before) },
    variant: { configuration: describe(variant), ...meanMetrics(after) },
    difference: { map: test((query) => query.averagePrecision), ndcg: test((query) => query.ndcg), ndcgAt10: test((query) => query.ndcgAt10) },
    published: PUBLISHED_BM25,
  };
  if (process.argv.includes('--json')) {
    process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
    return;
  }
  const line = (metrics: RunMetrics): string => `MAP ${metrics.map.toFixed(4)}  nDCG ${metrics.ndcg.toFixed(4)}  nDCG@10 ${metrics.ndcgAt10.toFixed(4)}`;
  const change = (name: string, result: PairedTest): string =>
    `${name} ${result.meanDifference >= 0 ? '+' : ''}${result.meanDifference.toFixed(4)} (p = ${result.p.toFixed(4)}; better on ${result.better} queries, worse on ${result.worse})`;
  process.stdout.write(
    [
      `Vaswani (NPL), in-memory index, ${collection.queries.length} queries ranked ${DEPTH} deep`,
      `  baseline (${report.baseline.configuration}): ${line(report.baseline)}`,
      `  variant  (${report.variant.configuration}): ${line(report.variant)}`,
      `  variant − baseline, paired randomisation test: ${change('MAP', report.difference.map)}, ${change('nDCG', report.difference.ndcg)}, ${change('nDCG@10', report.difference.ndcgAt10)}`,
      `  published BM25 (Terrier): MAP ${PUBLISHED_BM25.map}  nDCG ${PUBLISHED_BM25.ndcg}`,
      '',
    ].join('\n'),
  );
}

try {
  main();
} catch (error: unknown) {
  process.stderr.write(`eval:brain:ablation failed: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
}
