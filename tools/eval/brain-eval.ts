/**
 * `npm run eval:brain`: retrieval quality of the Brain on the Vaswani (NPL) test collection.
 *
 * Starts the all-in-one stack (as `npm start` runs it) on a fresh embedded PostgreSQL, creates an
 * enterprise tenant through the operator API, loads the 11,429 documents through
 * `POST /api/brain/documents`, and runs the 93 queries:
 *
 *  - through `GET /api/brain/query` (k = 50, the public maximum): a run 50 deep;
 *  - through the brain's own ranking code on the same database and key, 1000 deep, as trec_eval
 *    evaluates (and as the published BM25 figures were made). Its first 50 are checked to equal
 *    the API's answer, so both runs come from one ranking.
 *
 * Reports MAP, nDCG and nDCG@10 (trec_eval semantics, tools/eval/trec-metrics.ts) for both runs.
 * Options: --concurrency=N (ingestion requests in flight, default 8), --json (machine output).
 */
import { openBrainReader } from '@mission/service-brain';
import { runWithTenant } from '@mission/tenant-context';
import { call } from '../../test/support/api-client';
import { startEmbeddedBrainStack } from '../../test/support/embedded-brain-stack';
import { evaluateRun, RunMetrics, ScoredDocument } from './trec-metrics';
import { loadCollection, PUBLISHED_BM25 } from './vaswani';

const API_DEPTH = 50;
const FULL_DEPTH = 1000;

const log = (message: string): void => {
  process.stderr.write(`[eval:brain] ${message}\n`);
};

/** Runs `work` over `items` with at most `limit` in flight. */
async function inParallel<T>(items: readonly T[], limit: number, work: (item: T, index: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      for (let index = next++; index < items.length; index = next++) await work(items[index] as T, index);
    }),
  );
}

/** A chunk ranking as a document ranking: each document scores its best chunk. */
function documentRun(results: ReadonlyArray<{ documentId: string; score: number }>, docnoOf: ReadonlyMap<string, string>): ScoredDocument[] {
  const best = new Map<string, number>();
  for (const result of results) {
    const docno = docnoOf.get(result.documentId);
    if (docno === undefined) throw new Error(`The brain returned a document this evaluation did not load: ${result.documentId}`);
    best.set(docno, Math.max(best.get(docno) ?? Number.NEGATIVE_INFINITY, result.score));
  }
  return [...best].map(([docno, score]) => ({ docno, score }));
}

function format(metrics: RunMetrics): string {
  return `MAP ${metrics.map.toFixed(4)}  nDCG ${metrics.ndcg.toFixed(4)}  nDCG@10 ${metrics.ndcgAt10.toFixed(4)}`;
}

async function main(): Promise<void> {
  const concurrency = Number(/^--concurrency=(\d+)$/.exec(process.argv.find((arg) => arg.startsWith('--concurrency=')) ?? '')?.[1] ?? 8);
  const asJson = process.argv.includes('--json');
  const collection = loadCollection();
  log(
    `collection: ${collection.documents.length} documents, ${collection.queries.length} queries, ${[...collection.qrels.values()].reduce((n, s) => n + s.size, 0)} relevance judgements`,
  );

  const stack = await startEmbeddedBrainStack({ label: 'eval-brain', tenantName: 'Vaswani evaluation', log });
  const { gatewayUrl, token } = stack;
  try {
    log(`ingesting through POST /api/brain/documents, ${concurrency} at a time`);
    const docnoOf = new Map<string, string>();
    let chunks = 0;
    const ingestStarted = performance.now();
    await inParallel(collection.documents, concurrency, async (document) => {
      const response = await call(gatewayUrl, 'POST', '/api/brain/documents', { token, body: { title: document.docno, content: document.text } });
      if (response.status !== 201) throw new Error(`Ingesting ${document.docno} answered ${response.status}: ${JSON.stringify(response.body)}`);
      docnoOf.set(response.body.id, document.docno);
      chunks += response.body.chunkCount;
    });
    const ingestSeconds = (performance.now() - ingestStarted) / 1000;
    log(`ingested ${docnoOf.size} documents (${chunks} chunks) in ${ingestSeconds.toFixed(1)} s`);

    const apiRun = new Map<string, ScoredDocument[]>();
    const apiChunks = new Map<string, Array<{ chunkId: string; score: number }>>();
    const latencies: number[] = [];
    for (const query of collection.queries) {
      const started = performance.now();
      const response = await call(gatewayUrl, 'GET', `/api/brain/query?q=${encodeURIComponent(query.text)}&k=${API_DEPTH}`, { token });
      latencies.push(performance.now() - started);
      if (response.status !== 200) throw new Error(`Query ${query.qid} answered ${response.status}: ${JSON.stringify(response.body)}`);
      apiRun.set(query.qid, documentRun(response.body.results, docnoOf));
      apiChunks.set(query.qid, response.body.results);
    }

    const reader = await openBrainReader({ databaseUrl: stack.postgresUrl, indexKeys: stack.indexSecret, keys: stack.keys });
    const fullRun = new Map<string, ScoredDocument[]>();
    let mismatches = 0;
    try {
      for (const query of collection.queries) {
        const results = await runWithTenant({ tenantId: stack.tenantId }, () => reader.search(query.text, FULL_DEPTH));
        fullRun.set(query.qid, documentRun(results, docnoOf));
        const head = results.slice(0, API_DEPTH).map((result) => result.chunkId);
        if (JSON.stringify(head) !== JSON.stringify(apiChunks.get(query.qid)?.map((result) => result.chunkId))) mismatches += 1;
      }
    } finally {
      await reader.close();
    }
    if (mismatches > 0) throw new Error(`${mismatches} queries ranked differently through the API and the internal path`);

    const sorted = [...latencies].sort((a, b) => a - b);
    const report = {
      date: new Date().toISOString(),
      documents: docnoOf.size,
      chunks,
      queries: collection.queries.length,
      ingestSeconds: Math.round(ingestSeconds * 10) / 10,
      apiQueryLatencyMs: { p50: Math.round((sorted[Math.floor(sorted.length / 2)] ?? 0) * 10) / 10, max: Math.round((sorted[sorted.length - 1] ?? 0) * 10) / 10 },
      depth1000: evaluateRun(fullRun, collection.qrels),
      depth50: evaluateRun(apiRun, collection.qrels),
      published: PUBLISHED_BM25,
    };
    if (asJson) {
      process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
    } else {
      process.stdout.write(
        [
          `Vaswani (NPL): ${report.documents} documents (${report.chunks} chunks), ${report.queries} queries, ${report.date}`,
          `  depth 1000 (internal path): ${format(report.depth1000)}`,
          `  depth 50 (GET /api/brain/query, k=50): ${format(report.depth50)}`,
          `  published BM25 (Terrier): MAP ${PUBLISHED_BM25.map}  nDCG ${PUBLISHED_BM25.ndcg}`,
          `  the first 50 of every depth-1000 ranking equal the API's answer`,
          `  ingestion ${report.ingestSeconds} s; API query latency p50 ${report.apiQueryLatencyMs.p50} ms, max ${report.apiQueryLatencyMs.max} ms`,
          '',
        ].join('\n'),
      );
    }
  } finally {
    await stack.stop();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`eval:brain failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
