/**
 * Brain benchmark: ingestion throughput and query latency at 100,000 chunks in one tenant.
 *
 *   node -r ./tools/register.cjs bench/brain.ts [--chunks=100000] [--queries=300] [--concurrency=4] [--no-vacuum] [--json]
 *
 * Starts the all-in-one stack (as `npm start`) on a fresh embedded PostgreSQL, creates an
 * enterprise tenant, and generates a synthetic English-like corpus (seeded, so every run indexes
 * the same text): a 50,000-word vocabulary drawn from a Zipf–Mandelbrot distribution, between
 * real English stop words, in sentences and paragraphs, in documents of about 150 KB.
 *
 * - Ingestion: every document (made before the clock starts, a few more just in time should the
 *   estimate fall short) through `POST /api/brain/documents`, `--concurrency` at a time,
 *   until the last chunk is merged into the posting blocks (and, apart, until the last is stored);
 *   MB/s of content (UTF-8) over the wall time, the CPU per MB of each process, and the all-in-one
 *   process's resident memory at its highest (analysis threads included).
 * - Query latency: after a VACUUM (ANALYZE) of the brain schema (the steady state autovacuum
 *   reaches by itself), `--queries` queries of 2 to 4 content words drawn by corpus frequency (so
 *   most contain a common word with a long posting list: a pessimistic mix), one at a time,
 *   after a warm-up of 50; measured end to end through `GET /api/brain/query?k=10` (HTTP, token
 *   check, bus, SQL) and, interleaved, for the ranking alone on the same database (no HTTP, no bus).
 */
import { readFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import { Client } from 'pg';
import { openBrainReader } from '@mission/service-brain';
import { runWithTenant } from '@mission/tenant-context';
import { call } from '../test/support/api-client';
import { startEmbeddedBrainStack } from '../test/support/embedded-brain-stack';
import { seededRandom } from '../test/support/seeded-random';
import { cpuBetween, cpuSnapshot, postgresStartedHere } from './support/cpu';
import { postgresWriteSnapshot, postgresWritesBetween } from './support/postgres-writes';
import { gitInfo } from './support/report';
import { percentiles, Percentiles } from './support/stats';

const log = (message: string): void => {
  process.stderr.write(`[bench:brain] ${message}\n`);
};

function option(name: string, fallback: number): number {
  const raw = process.argv.find((arg) => arg.startsWith(`--${name}=`))?.split('=')[1];
  const value = raw === undefined ? fallback : Number(raw);
  if (!Number.isInteger(value) || value < 1) throw new Error(`--${name} must be a positive integer`);
  return value;
}

const STOP_WORDS =
  'the of and to a in is that for it as was with be by on not he this are or his from at which but have an they you were her she there been one all we their has would when if so no will more can who out up than its what them into only'.split(
    ' ',
  );
const VOCABULARY_SIZE = 50_000;
/** Zipf–Mandelbrot offset: the most frequent content word is about 0.4 % of content words. */
const ZIPF_OFFSET = 30;

class Corpus {
  private readonly random = seededRandom(20261122);
  private readonly words: string[] = [];
  private readonly cumulative = new Float64Array(VOCABULARY_SIZE);

  constructor() {
    const consonants = 'bcdfghjklmnprstvz';
    const vowels = 'aeiou';
    const seen = new Set<string>();
    while (this.words.length < VOCABULARY_SIZE) {
      const syllables = 2 + Math.floor(this.random() * 3);
      let word = '';
      for (let s = 0; s < syllables; s++) word += consonants[Math.floor(this.random() * consonants.length)] + vowels[Math.floor(this.random() * vowels.length)];
      if (!seen.has(word)) {
        seen.add(word);
        this.words.push(word);
      }
    }
    let total = 0;
    for (let rank = 0; rank < VOCABULARY_SIZE; rank++) {
      total += 1 / (rank + 1 + ZIPF_OFFSET);
      this.cumulative[rank] = total;
    }
    for (let rank = 0; rank < VOCABULARY_SIZE; rank++) this.cumulative[rank] = (this.cumulative[rank] ?? 0) / total;
  }

  /** A content word drawn by its corpus frequency. */
  word(): string {
    const u = this.random();
    let low = 0;
    let high = VOCABULARY_SIZE - 1;
    while (low < high) {
      const middle = (low + high) >> 1;
      if ((this.cumulative[middle] ?? 1) < u) low = middle + 1;
      else high = middle;
    }
    return this.words[low] ?? 'x';
  }

  private sentence(): string {
    const length = 8 + Math.floor(this.random() * 14);
    const tokens: string[] = [];
    for (let n = 0; n < length; n++) tokens.push(this.random() < 0.4 ? (STOP_WORDS[Math.floor(this.random() * STOP_WORDS.length)] ?? 'the') : this.word());
    const text = tokens.join(' ');
    return `${text.charAt(0).toUpperCase()}${text.slice(1)}.`;
  }

  document(targetBytes: number): string {
    const paragraphs: string[] = [];
    let size = 0;
    while (size < targetBytes) {
      const sentences = Array.from({ length: 4 + Math.floor(this.random() * 5) }, () => this.sentence()).join(' ');
      paragraphs.push(sentences);
      size += sentences.length + 2;
    }
    return paragraphs.join('\n\n');
  }

  query(): string {
    return Array.from({ length: 2 + Math.floor(this.random() * 3) }, () => this.word()).join(' ');
  }
}

/** Runs `work` with `limit` calls in flight until `done()` holds. */
async function whileNotDone(limit: number, done: () => boolean, work: (index: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: limit }, async () => {
      while (!done()) await work(next++);
    }),
  );
}

/** The posting blocks the merges wrote (every tenant's: the benchmark has one). */
async function countPostingBlocks(postgresUrl: string): Promise<number> {
  const database = new Client({ connectionString: postgresUrl });
  await database.connect();
  try {
    const { rows } = await database.query(`SELECT count(*)::int AS n FROM brain.posting_blocks`);
    return rows[0].n;
  } finally {
    await database.end();
  }
}

async function main(): Promise<void> {
  const targetChunks = option('chunks', 100_000);
  const queryCount = option('queries', 300);
  const concurrency = option('concurrency', 4);
  const documentBytes = 150_000;
  const corpus = new Corpus();

  const stack = await startEmbeddedBrainStack({ label: 'bench-brain', tenantName: 'Brain benchmark', env: { NODE_ENV: 'production' }, log });
  let statistics: Client | undefined;
  const { gatewayUrl, token } = stack;
  try {
    // Ingestion: the documents are made before the clock starts, as a client would have its files
    // (making them costs this process about 35 CPU-ms per MB, which the machine's two cores would
    // otherwise take from the stack under test); a few more just in time should the estimate fall
    // short. The count follows the chunks the service reports.
    const estimatedDocuments = Math.ceil(targetChunks / Math.floor(documentBytes / 1_200));
    // Each request's body is made before the clock starts too (a client uploading files has them),
    // and sent over kept-alive connections of node:http: fetch's streams cost the client, on the
    // same two cores, about as much CPU per MB as the body's JSON (bench/README.md).
    const body = (index: number, content: string): Buffer => Buffer.from(JSON.stringify({ title: `Synthetic document ${index}`, content }), 'utf8');
    const prepared = Array.from({ length: Math.ceil(estimatedDocuments * 1.05) }, (_, index) => {
      const content = corpus.document(documentBytes);
      return { content, body: body(index, content) };
    });
    const uploads = new http.Agent({ keepAlive: true, maxSockets: concurrency });
    log(`ingesting about ${estimatedDocuments} documents of ~${documentBytes / 1000} KB until ${targetChunks} chunks, ${concurrency} at a time`);
    let chunks = 0;
    let bytes = 0;
    let documents = 0;
    statistics = new Client({ connectionString: stack.postgresUrl });
    statistics.on('error', () => undefined); // the stack's PostgreSQL stops under it should ingestion fail
    await statistics.connect();
    const writesBefore = await postgresWriteSnapshot(statistics);
    const cpuBefore = cpuSnapshot();
    const started = performance.now();
    let lastReport = started;
    await whileNotDone(
      concurrency,
      () => chunks >= targetChunks,
      async (index) => {
        const document = prepared[index] ?? ((content) => ({ content, body: body(index, content) }))(corpus.document(documentBytes));
        const response = await postJson(uploads, `${gatewayUrl}/api/brain/documents`, token, document.body);
        if (response.status !== 201) throw new Error(`Ingestion answered ${response.status}: ${JSON.stringify(response.body)}`);
        chunks += (response.body as { chunkCount: number }).chunkCount;
        bytes += Buffer.byteLength(document.content);
        documents += 1;
        if (performance.now() - lastReport > 15_000) {
          lastReport = performance.now();
          log(`  ${chunks} chunks, ${(bytes / 1e6).toFixed(0)} MB, ${(bytes / 1e6 / ((lastReport - started) / 1000)).toFixed(2)} MB/s`);
        }
      },
    );
    const storedSeconds = (performance.now() - started) / 1000;
    uploads.destroy();
    log(`stored ${documents} documents, ${chunks} chunks, ${(bytes / 1e6).toFixed(1)} MB in ${storedSeconds.toFixed(1)} s`);
    // A stored document is found at once, but its chunks wait for a background merge into the
    // posting blocks: ingestion counts until the last of them is merged.
    const database = new Client({ connectionString: stack.postgresUrl });
    await database.connect();
    try {
      const deadline = performance.now() + 600_000;
      for (;;) {
        const { rows } = await database.query(`SELECT count(*)::int AS n FROM brain.unmerged_chunks`);
        if (rows[0].n === 0) break;
        if (performance.now() > deadline) throw new Error(`${rows[0].n} chunks still wait for a merge 10 minutes after the last document was stored`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    } finally {
      await database.end();
    }
    const ingestSeconds = (performance.now() - started) / 1000;
    const ingestionCpu = ingestionCpuPerMegabyte(cpuBefore, stack, bytes);
    // Backends report their statistics at most once a second: wait for the last merge's.
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    const writes = postgresWritesBetween(writesBefore, await postgresWriteSnapshot(statistics));
    await statistics.end();
    statistics = undefined;
    log(
      `PostgreSQL wrote ${writes.walMegabytes} MB of WAL (${writes.walFullPageImages} full-page images, up to ${Math.round(writes.fullPageImageShare * 100)} %), ${writes.checkpoints} checkpoints; MB by process/object/context: ${JSON.stringify(writes.io)}`,
    );
    const peakResidentMiB = peakResidentMemoryMiB(stack.pid);
    if (peakResidentMiB !== null) log(`the all-in-one process's resident memory at most, since it started: ${peakResidentMiB} MiB`);
    log(`merged into the index ${(ingestSeconds - storedSeconds).toFixed(1)} s later`);
    // What a query reads depends on it: a term's postings lie in one block per merge that met it.
    const blocks = await countPostingBlocks(stack.postgresUrl);
    log(`posting blocks: ${blocks}`);
    if (ingestionCpu) log(`CPU ms per MB ingested: all-in-one process ${ingestionCpu.process}, PostgreSQL ${ingestionCpu.postgres}, this client ${ingestionCpu.client}`);

    // Steady state: index-only scans need the visibility map that (auto)vacuum sets after a bulk
    // load; without it every posting costs a heap visit. Autovacuum gets there on its own in
    // minutes; the benchmark does not wait for it. `--no-vacuum` measures straight after the load.
    const vacuum = !process.argv.includes('--no-vacuum');
    const vacuumStarted = performance.now();
    if (vacuum) {
      const database = new Client({ connectionString: stack.postgresUrl });
      await database.connect();
      try {
        await database.query('VACUUM (ANALYZE) brain.posting_blocks, brain.unmerged_chunks, brain.chunks, brain.documents, brain.tenant_stats');
      } finally {
        await database.end();
      }
    }
    const vacuumSeconds = vacuum ? (performance.now() - vacuumStarted) / 1000 : 0;
    log(vacuum ? `vacuumed in ${vacuumSeconds.toFixed(1)} s; querying` : 'querying straight after the load (no VACUUM)');

    // The same queries end to end and through the ranking alone, interleaved so both see the same conditions.
    // Queries from a stream of their own: the same whatever number of documents was made.
    const queryWords = new Corpus();
    const queries = Array.from({ length: queryCount + 50 }, () => queryWords.query());
    const reader = await openBrainReader({ databaseUrl: stack.postgresUrl, indexKeys: stack.indexSecret, keys: stack.keys });
    const httpSamples: number[] = [];
    const rankingSamples: number[] = [];
    try {
      for (const [index, q] of queries.entries()) {
        let begin = performance.now();
        const response = await call(gatewayUrl, 'GET', `/api/brain/query?q=${encodeURIComponent(q)}&k=10`, { token });
        if (response.status !== 200) throw new Error(`Query answered ${response.status}`);
        if (index >= 50) httpSamples.push(performance.now() - begin);
        begin = performance.now();
        await runWithTenant({ tenantId: stack.tenantId }, () => reader.search(q, 10));
        if (index >= 50) rankingSamples.push(performance.now() - begin);
      }
    } finally {
      await reader.close();
    }

    const report = {
      date: new Date().toISOString(),
      git: gitInfo(),
      machine: {
        cpus: os.cpus().length,
        model: os.cpus()[0]?.model,
        memoryGiB: Math.round(os.totalmem() / 2 ** 30),
        loadAverage: os.loadavg().map((n) => Math.round(n * 100) / 100),
      },
      corpus: { documents, chunks, megabytes: Math.round(bytes / 1e5) / 10, vocabulary: VOCABULARY_SIZE },
      postingBlocks: blocks,
      vacuumed: vacuum,
      vacuumSeconds: Math.round(vacuumSeconds * 10) / 10,
      ingestion: {
        seconds: Math.round(ingestSeconds * 10) / 10,
        megabytesPerSecond: Math.round((bytes / 1e6 / ingestSeconds) * 100) / 100,
        storedSeconds: Math.round(storedSeconds * 10) / 10,
        storedMegabytesPerSecond: Math.round((bytes / 1e6 / storedSeconds) * 100) / 100,
        chunksPerSecond: Math.round(chunks / ingestSeconds),
        concurrency,
        cpuMsPerMegabyte: ingestionCpu,
        peakResidentMiB,
        postgresWrites: writes,
      },
      queryLatencyMs: { queries: queryCount, k: 10, http: percentiles(httpSamples), ranking: percentiles(rankingSamples), target: { p50: 10, p99: 25 } },
      ingestionTarget: { megabytesPerSecond: 10 },
    };
    if (process.argv.includes('--json')) {
      process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
    } else {
      const row = (name: string, l: Percentiles): string => `| ${name} | ${l.p50} | ${l.p90} | ${l.p99} | ${l.mean} | ${l.max} |`;
      process.stdout.write(
        [
          `Brain benchmark ${report.date}, commit ${report.git.commit.slice(0, 12)}${report.git.dirty ? ' (with uncommitted changes)' : ''}: ${chunks} chunks (${documents} documents, ${report.corpus.megabytes} MB) in one tenant`,
          `Ingestion: ${report.ingestion.megabytesPerSecond} MB/s until merged into the index (${report.ingestion.chunksPerSecond} chunks/s, ${concurrency} requests in flight; ${report.ingestion.storedMegabytesPerSecond} MB/s stored and searchable)${peakResidentMiB === null ? '' : `; the all-in-one process at most ${peakResidentMiB} MiB resident`}`,
          ...(ingestionCpu
            ? [
                `CPU ms per MB ingested: all-in-one process ${ingestionCpu.process}, embedded PostgreSQL ${ingestionCpu.postgres} (all its processes), this client ${ingestionCpu.client}`,
              ]
            : []),
          '',
          `| query latency, ms (k = 10, ${queryCount} queries) | p50 | p90 | p99 | mean | max |`,
          '|---|--:|--:|--:|--:|--:|',
          row('GET /api/brain/query (end to end)', report.queryLatencyMs.http),
          row('ranking alone (same database)', report.queryLatencyMs.ranking),
          '',
          `Goals: query p50 ≤ 10 ms and p99 ≤ 25 ms at 100k chunks, straight after a bulk load; ingestion ≥ 10 MB/s. Machine: ${report.machine.cpus} × ${report.machine.model}, load average ${report.machine.loadAverage.join(' ')}.`,
          '',
        ].join('\n'),
      );
    }
  } finally {
    await statistics?.end().catch(() => undefined);
    await stack.stop();
  }
}

/** POSTs a JSON body already made, over `agent`'s connections; the status and the parsed answer. */
function postJson(agent: http.Agent, url: string, token: string, body: Buffer): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    const request = http.request(
      url,
      { method: 'POST', agent, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'content-length': body.length } },
      (response) => {
        const parts: Buffer[] = [];
        response.on('data', (part: Buffer) => parts.push(part));
        response.once('error', reject);
        response.once('end', () => {
          const text = Buffer.concat(parts).toString('utf8');
          let parsed: unknown = text;
          try {
            parsed = JSON.parse(text);
          } catch {
            // not JSON: kept as text for the error message
          }
          resolve({ status: response.statusCode ?? 0, body: parsed });
        });
      },
    );
    request.once('error', reject);
    // A document takes tens of milliseconds; a gateway that has not answered in two minutes has stalled.
    request.setTimeout(120_000, () => request.destroy(new Error('No answer to a document within 120 s')));
    request.end(body);
  });
}

/** The process's resident memory at its highest so far (VmHWM), in MiB; null where /proc cannot tell. */
function peakResidentMemoryMiB(pid: number | undefined): number | null {
  if (pid === undefined) return null;
  try {
    const match = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Math.round(Number(match[1]) / 1024) : null;
  } catch {
    return null;
  }
}

/**
 * CPU milliseconds per MB of content since `before`, until now (the last chunk merged): of the
 * all-in-one process, of the embedded PostgreSQL (its postmaster with every backend and
 * background process: autovacuum, WAL writer, checkpointer), and of this client (generating and
 * sending the documents). Null where /proc cannot tell.
 */
function ingestionCpuPerMegabyte(
  before: ReturnType<typeof cpuSnapshot>,
  stack: { readonly pid: number | undefined },
  bytes: number,
): { process: number; postgres: number; client: number } | null {
  const [postgres, ...more] = postgresStartedHere(before);
  if (stack.pid === undefined || postgres === undefined || more.length > 0 || bytes === 0) return null;
  const cpu = cpuBetween(before, cpuSnapshot(), { process: stack.pid, postgres }, os.cpus().length);
  if (!cpu) return null;
  const megabytes = bytes / 1e6;
  const perMegabyte = (ms: number): number => Math.round(ms / megabytes);
  return {
    process: perMegabyte(cpu.serversCpuMs.process ?? 0),
    postgres: perMegabyte(cpu.serversCpuMs.postgres ?? 0),
    client: perMegabyte((cpu.client / 100) * cpu.seconds * 1000),
  };
}

main().catch((error: unknown) => {
  process.stderr.write(`bench:brain failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
