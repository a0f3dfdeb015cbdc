import { availableParallelism } from 'node:os';
import path from 'node:path';
import { Piscina } from 'piscina';
import type { TermHasher } from '../index/blind-index';
import type { AnalysisTask } from './analysis.worker';
import type { ChunkingOptions } from './chunker';
import { type AnalysedChunk, analyseDocument, type PackedAnalysis, unpackAnalysis } from './document-analysis';

/** Where ingestion's analysis (chunking, analysis, keyed hashes: analyseDocument) runs. */
export interface DocumentAnalysis {
  /** `key`: the tenant's blind-index key, which `hasher` hashes with. */
  analyse(tenantId: string, key: Buffer, hasher: TermHasher, content: string, title: string, chunking: ChunkingOptions): Promise<AnalysedChunk[]>;
  close(): Promise<void>;
}

/** On the service's own thread, returning to the event loop every few dozen chunks. */
export const IN_THREAD_ANALYSIS: DocumentAnalysis = {
  analyse: (_tenantId, _key, hasher, content, title, chunking) => analyseDocument(hasher, content, title, chunking),
  close: async () => undefined,
};

export interface WorkerAnalysisOptions {
  /** Analysis threads at most (started when needed, stopped after idleTimeoutMs): one fewer than the machine's cores, at least 1, at most 2 by default. */
  readonly threads?: number;
  /** Documents shorter than this (characters) are analysed on the service's thread: handing them over would cost about as much (16,384 by default). */
  readonly minChars?: number;
  /** A thread idle this long stops, giving its memory back (30,000 by default). */
  readonly idleTimeoutMs?: number;
  /** Documents handed to the threads at once at most; more are analysed on the service's thread (8 per thread by default). */
  readonly maxInFlight?: number;
  /** After a thread failed, documents are analysed on the service's thread for this long (60,000 by default). */
  readonly retryAfterMs?: number;
  /** The worker's module (tests); analysis.worker.ts by default. */
  readonly filename?: string;
  readonly logger?: { error(message: string, context?: Record<string, unknown>): void };
}

/** The project's TypeScript loader, which a worker thread needs when its parent was not started with it (as under Jest). */
const REGISTER = path.resolve(__dirname, '../../../../tools/register.cjs');

/**
 * Ingestion's analysis on worker threads (piscina), so that the service's thread, which also
 * parses requests, seals passages, writes them and merges the index, is not held by it (about half
 * its work per megabyte ingested: bench/README.md). A document's chunks come back as the
 * service's thread would have made them (the same analysis, the same keyed hashes); a thread
 * keeps its own dictionary and its own hashers by tenant. Small documents, documents past
 * `maxInFlight`, and everything for a while after a thread failed (logged) are analysed on the
 * service's thread: analysis never waits for a thread that is not there.
 */
export class WorkerDocumentAnalysis implements DocumentAnalysis {
  private pool: Piscina | undefined;
  private closed = false;
  private unavailableUntil = 0;
  private inFlight = 0;
  private readonly threads: number;
  private readonly minChars: number;
  private readonly idleTimeoutMs: number;
  private readonly maxInFlight: number;
  private readonly retryAfterMs: number;
  /** Documents analysed on a thread, on the service's thread, and threads that failed (tests, metrics). */
  readonly counts = { threaded: 0, inThread: 0, failures: 0 };

  constructor(private readonly options: WorkerAnalysisOptions = {}) {
    this.threads = options.threads ?? Math.max(1, Math.min(2, availableParallelism() - 1));
    this.minChars = options.minChars ?? 16_384;
    this.idleTimeoutMs = options.idleTimeoutMs ?? 30_000;
    this.maxInFlight = options.maxInFlight ?? 8 * this.threads;
    this.retryAfterMs = options.retryAfterMs ?? 60_000;
    if (!Number.isSafeInteger(this.threads) || this.threads < 1) throw new RangeError('threads must be a whole number of at least 1');
    if (!Number.isSafeInteger(this.maxInFlight) || this.maxInFlight < 1) throw new RangeError('maxInFlight must be a whole number of at least 1');
  }

  async analyse(tenantId: string, key: Buffer, hasher: TermHasher, content: string, title: string, chunking: ChunkingOptions): Promise<AnalysedChunk[]> {
    if (this.closed || content.length < this.minChars || this.inFlight >= this.maxInFlight || performance.now() < this.unavailableUntil) {
      this.counts.inThread++;
      return analyseDocument(hasher, content, title, chunking);
    }
    this.inFlight++;
    let pool: Piscina | undefined;
    try {
      pool = this.poolOf();
      // The key copied into an array of its own: a Buffer may be a view of a shared pool, which a clone would carry whole.
      const task: AnalysisTask = { tenantId, key: new Uint8Array(key), content, title, chunking };
      const chunks = unpackAnalysis((await pool.run(task)) as PackedAnalysis);
      this.counts.threaded++;
      return chunks;
    } catch (error) {
      this.failed(pool, error);
      this.counts.inThread++;
      return analyseDocument(hasher, content, title, chunking);
    } finally {
      this.inFlight--;
    }
  }

  /**
   * A thread failed (or could not start): the service's thread analyses for retryAfterMs, and the
   * pool goes, rejecting what it still held (those documents are analysed on the service's thread).
   * Once per pool, and not when closing.
   */
  private failed(pool: Piscina | undefined, error: unknown): void {
    if (this.closed || (pool !== undefined && this.pool !== pool)) return;
    this.counts.failures++;
    this.unavailableUntil = performance.now() + this.retryAfterMs;
    this.pool = undefined;
    void pool?.destroy().catch(() => undefined);
    try {
      this.options.logger?.error('A document analysis thread failed; analysing on the service thread for a while', { error: String(error) });
    } catch {
      // A failing logger must not fail the ingestion.
    }
  }

  /** Stops the threads (an analysis under way there is made on the service's thread instead); later documents are analysed on the service's thread. */
  async close(): Promise<void> {
    this.closed = true;
    const pool = this.pool;
    this.pool = undefined;
    await pool?.destroy();
  }

  private poolOf(): Piscina {
    if (!this.pool) {
      const filename = this.options.filename ?? path.join(__dirname, 'analysis.worker.ts');
      // Threads inherit the parent's options, the TypeScript loader with them; a parent without it (Jest) hands it over.
      const loaderMissing = filename.endsWith('.ts') && !process.execArgv.some((arg) => arg.includes('register.cjs'));
      const pool = new Piscina({
        filename,
        minThreads: 0,
        maxThreads: this.threads,
        idleTimeout: this.idleTimeoutMs,
        concurrentTasksPerWorker: 1,
        ...(loaderMissing ? { execArgv: ['--require', REGISTER] } : {}),
      });
      // A thread that fails before it takes a task (its module does not load, it cannot start) is
      // reported here, not to a task: unheard, the event would end the process.
      pool.on('error', (error: unknown) => this.failed(pool, error));
      this.pool = pool;
    }
    return this.pool;
  }
}
