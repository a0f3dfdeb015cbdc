import { randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import {
  BrainDocumentView,
  BrainQueryResult,
  BrainQuerySchema,
  BrainResult,
  decodeCursor,
  decodeSequenceCursor,
  DomainError,
  encodeCursor,
  encodeSequenceCursor,
  IngestDocumentCommandSchema,
  IngestedDocumentView,
  Page,
  PageQuerySchema,
  PassageView,
  parseIngestDocument,
  parseOrThrow,
  TIER_STORAGE,
} from '@mission/contracts';
import { sqlStateOf, tenantTransaction } from '@mission/persistence';
import { currentTenant, runWithTenant } from '@mission/tenant-context';
import { TenantIndexKeys, TermHasher } from '../index/blind-index';
import { BM25_DEFAULTS, Bm25Parameters, lengthNormalisation, termWeight } from '../ranking/bm25';
import { termCounts } from '../text/analyzer';
import { type DocumentAnalysis, IN_THREAD_ANALYSIS } from '../text/document-analyser';
import { ChunkingOptions, DEFAULT_CHUNKING } from '../text/chunker';
import {
  BrainRepository,
  DELETION_SETTINGS,
  DocumentRow,
  IndexedChunk,
  IndexKeyMismatchError,
  MERGE_BATCH_CHUNKS,
  MERGE_SETTINGS,
  RANKING_SETTINGS,
  RankedChunkRow,
} from './brain.repository';
import { WAITING_TERMS_MAX_BYTES, WaitingChunkTerms } from './waiting-chunk-terms';

export const BRAIN_SCHEMA = 'brain';

/** Distinct query terms considered; the rest of a very long query is ignored. */
export const MAX_QUERY_TERMS = 1_024;

/** Tenants whose term hashers (with their caches of recent hashes) are kept. */
const MAX_CACHED_TENANTS = 64;

function documentView(row: DocumentRow): BrainDocumentView {
  return {
    id: row.id,
    title: row.title,
    ...(row.source !== null ? { source: row.source } : {}),
    metadata: row.metadata,
    chunkCount: row.chunkCount,
    contentBytes: row.contentBytes,
    createdAt: row.createdAt.toISOString(),
  };
}

function resultView(row: RankedChunkRow): BrainResult {
  return {
    documentId: row.documentId,
    chunkId: row.chunkId,
    title: row.title,
    text: row.text,
    score: row.score,
    ...(row.source !== null ? { source: row.source } : {}),
  };
}

export interface BrainServiceSettings {
  readonly bm25: Bm25Parameters;
  readonly chunking: ChunkingOptions;
  /** How long a merge waits for more documents to merge together (MERGE_GATHER_MS when absent). */
  readonly mergeGatherMs?: number;
  /** Chunks one merge takes at most, and how many make a merge start without gathering (MERGE_BATCH_CHUNKS when absent). */
  readonly mergeBatchChunks?: number;
  /** The stored chunks' terms kept for their merge at most, in bytes (WAITING_TERMS_MAX_BYTES when absent; 0 keeps none). */
  readonly waitingTermsMaxBytes?: number;
  /** Where ingestion's analysis runs (on the service's thread when absent); closed with stopMerging. */
  readonly analysis?: DocumentAnalysis;
}

export interface BrainServiceLogger {
  error(message: string, context?: Record<string, unknown>): void;
}

/**
 * A tenant's merge in this process: `again` when chunks arrived since its turn began, `gathered`
 * how many (Infinity when a sweep or a retry asks: merge without waiting), `gathering` the timer
 * of a merge waiting for more documents (MERGE_GATHER_MS).
 */
interface MergeState {
  again: boolean;
  gathered: number;
  gathering?: NodeJS.Timeout;
  /** When (performance.now()) the tenant's last document was stored: a loading gather ends once none has come for its quiet time (quietTime). */
  lastArrival: number;
  /** The time between the tenant's documents lately (ms, a moving average), once two have come within a gathering time. */
  gap?: number;
  /** While a loading gather waits: looks again at once (a document arrived, and with it perhaps a shorter quiet time). */
  rewait?: () => void;
}

/** Tenants looked at per sweep for chunks left waiting for a merge (a crash between an ingestion and its merge). */
const SWEEP_TENANTS = 100;

/** Merges running at once in one process: each holds one of the pool's connections while it runs. */
const MAX_CONCURRENT_MERGES = 2;

/**
 * How long after a document is stored its merge waits for more documents of the tenant, unless a
 * full batch (MERGE_BATCH_CHUNKS) arrives sooner. A merge writes one block per distinct term of
 * its batch, whatever the batch's size, so under a bulk load fewer, larger merges write fewer rows
 * for the same chunks (bench/README.md, "Brain ingestion"). Nothing waits for it: a stored
 * document is searchable before its merge (a query then also reads the chunks waiting, which a
 * steady load keeps at up to a few seconds' worth, or a batch: LOADING_GATHER_FACTOR).
 */
export const MERGE_GATHER_MS = 1_000;

/**
 * While a tenant loads without pause (chunks arrived during its last merge), the next merge
 * gathers this many times MERGE_GATHER_MS, unless a full batch arrives sooner: at a couple of
 * MB/s a one-second merge took about 2,000 chunks and wrote a block for most of the vocabulary
 * each time, so the same load made up to a fifth more blocks once merges got faster (bench/README.md,
 * "Brain ingestion: merges from memory").
 */
export const LOADING_GATHER_FACTOR = 4;

/**
 * When the merge after a loading gather (LOADING_GATHER_FACTOR) starts, `now` ms: at the end of
 * the gathering (`deadline`), or once no document has come for `quietMs` (the load has stopped:
 * waiting longer gathers nothing, and its last chunks would wait the whole time), whichever comes
 * first.
 */
function loadingMergeStart(lastArrival: number, deadline: number, quietMs: number): number {
  return Math.min(deadline, lastArrival + quietMs);
}

/** A load has stopped once no document has come for this many of its usual gaps (quietTime). */
export const QUIET_GAPS = 8;
/** The least quiet time that ends a loading gather (quietTime). */
export const MIN_QUIET_MS = 100;

/**
 * How long without a document ends a loading gather: QUIET_GAPS times the tenant's usual gap
 * between documents, at least MIN_QUIET_MS, at most the gathering time (`gatherMs`), counted
 * while none of the tenant's documents is being ingested in this process (a document under way is
 * a load that has not stopped, however long an event-loop stall or a burst's pause). A bulk load of
 * a document every 20 ms has stopped 160 ms after its last one; its last chunks waited the whole
 * gathering time (a second) before, for nothing. A loader that sends a document every half second
 * still waits the gathering time, as before, so its documents still merge together.
 */
export function quietTime(gap: number | undefined, gatherMs: number): number {
  return gap === undefined ? gatherMs : Math.min(gatherMs, Math.max(MIN_QUIET_MS, QUIET_GAPS * gap));
}

/**
 * The tenant's usual gap between documents after one more arrived `interval` ms after the one
 * before: a moving average, the newest a quarter of it. An interval of a whole gathering time or
 * more starts another load: not a gap of this one, and left out.
 */
export function nextGap(gap: number | undefined, interval: number, gatherMs: number): number | undefined {
  if (interval >= gatherMs) return gap;
  return gap === undefined ? interval : 0.75 * gap + 0.25 * interval;
}

/** How soon to look again when another process holds a tenant's merge lock. */
const BUSY_RETRY_MS = 250;

/** Full batches one tenant merges before the next tenant in the queue has its turn. */
const MERGE_BATCHES_PER_TURN = 4;

/** The smallest batch a merge that keeps running into its statement timeout is cut down to. */
const MIN_MERGE_BATCH_CHUNKS = 64;

/** PostgreSQL's query_canceled, which a statement timeout raises. */
function isStatementTimeout(error: unknown): boolean {
  return sqlStateOf(error) === '57014';
}

/**
 * The current tenant's knowledge store: documents are chunked, analysed and indexed under the
 * tenant's blind-index key in the same transaction that stores them; queries rank chunks by BM25
 * over the tenant's own statistics.
 */
export class BrainService {
  private readonly hashers = new Map<string, { readonly key: Buffer; readonly hasher: TermHasher }>();
  /** Tenants with a merge gathering, queued or running in this process (MergeState). */
  private readonly merges = new Map<string, MergeState>();
  /** Ingestions under way in this process, by tenant: a loading gather does not end while one is (quietTime). */
  private readonly ingesting = new Map<string, number>();
  private readonly mergeQueue: string[] = [];
  /** Batch sizes cut down for tenants whose merges ran into the statement timeout. */
  private readonly mergeBatchSizes = new Map<string, number>();
  private readonly runningMerges = new Set<Promise<void>>();
  /** The terms of the chunks this process stored, until their merge takes them (bounded). */
  private readonly waitingTerms: WaitingChunkTerms;
  private stopping = false;
  private readonly mergeBatchChunks: number;
  private readonly analysis: DocumentAnalysis;

  constructor(
    private readonly dataSource: DataSource,
    private readonly repository: BrainRepository,
    private readonly keys: TenantIndexKeys,
    private readonly settings: BrainServiceSettings = { bm25: BM25_DEFAULTS, chunking: DEFAULT_CHUNKING },
    private readonly logger: BrainServiceLogger = { error: () => undefined },
  ) {
    this.mergeBatchChunks = settings.mergeBatchChunks ?? MERGE_BATCH_CHUNKS;
    this.analysis = settings.analysis ?? IN_THREAD_ANALYSIS;
    this.waitingTerms = new WaitingChunkTerms(settings.waitingTermsMaxBytes ?? WAITING_TERMS_MAX_BYTES);
    if (!Number.isSafeInteger(this.mergeBatchChunks) || this.mergeBatchChunks < 1) throw new RangeError('mergeBatchChunks must be a whole number of at least 1');
    const gatherMs = settings.mergeGatherMs ?? MERGE_GATHER_MS;
    // setTimeout takes anything above 2^31 - 1 ms, NaN or Infinity for 1 ms.
    if (!Number.isSafeInteger(gatherMs) || gatherMs < 0 || gatherMs > 2 ** 31 - 1) throw new RangeError('mergeGatherMs must be a whole number of milliseconds from 0 to 2^31 - 1');
  }

  /**
   * Merges the tenant's chunks waiting in unmerged_chunks into posting blocks, in the background:
   * one merge at a time per tenant in this process (a call while one runs or waits makes it go
   * round once more), at most MAX_CONCURRENT_MERGES tenants at once (each holds a database
   * connection), taking turns (mergeTenant) until none wait. `chunks`: how many the caller has
   * just stored; a merge first gathers for MERGE_GATHER_MS, or until a full batch of them has
   * arrived, so under a bulk load a merge's cost is shared by many documents (so are the
   * documents stored while a merge runs: they gather for the next). Without `chunks` (a sweep, a
   * retry) the merge goes to the queue at once. When another process is merging the tenant, this
   * one looks again after BUSY_RETRY_MS. Queries never depend on it: they read the waiting chunks too.
   */
  scheduleMerge(tenantId: string, chunks = Infinity): void {
    if (this.stopping) return;
    const known = this.merges.get(tenantId);
    if (known) {
      known.again = true;
      known.gathered += chunks;
      if (chunks !== Infinity) {
        const now = performance.now();
        known.gap = nextGap(known.gap, now - known.lastArrival, this.settings.mergeGatherMs ?? MERGE_GATHER_MS);
        known.lastArrival = now;
      }
      if (known.gathering && known.gathered >= this.mergeBatchChunks) this.queueMerge(tenantId, known);
      else known.rewait?.();
      return;
    }
    const state: MergeState = { again: false, gathered: chunks, lastArrival: performance.now() };
    this.merges.set(tenantId, state);
    this.gatherOrQueue(tenantId, state);
  }

  /**
   * Queues the tenant's merge once MERGE_GATHER_MS have passed or a full batch has gathered,
   * whichever comes first; when `loading` (chunks kept arriving during the last merge), once
   * LOADING_GATHER_FACTOR times that have passed or no document has come for the load's quiet
   * time (loadingMergeStart, quietTime), or a full batch has gathered.
   */
  private gatherOrQueue(tenantId: string, state: MergeState, loading = false): void {
    const baseMs = this.settings.mergeGatherMs ?? MERGE_GATHER_MS;
    const gatherMs = Math.min(baseMs * (loading ? LOADING_GATHER_FACTOR : 1), 2 ** 31 - 1);
    if (gatherMs <= 0 || state.gathered >= this.mergeBatchChunks) {
      this.queueMerge(tenantId, state);
      return;
    }
    if (!loading) {
      state.gathering = setTimeout(() => this.queueMerge(tenantId, state), gatherMs);
    } else {
      const deadline = performance.now() + gatherMs;
      const wait = (): void => {
        clearTimeout(state.gathering);
        state.gathering = undefined;
        const quietMs = quietTime(state.gap, baseMs);
        const now = performance.now();
        // A document of the tenant under way: the load goes on; looked at again a quiet time from now (or at its arrival).
        const underWay = (this.ingesting.get(tenantId) ?? 0) > 0;
        const start = underWay ? Math.min(deadline, now + quietMs) : loadingMergeStart(state.lastArrival, deadline, quietMs);
        if (now >= start) {
          this.queueMerge(tenantId, state);
          return;
        }
        state.gathering = setTimeout(wait, Math.ceil(start - now));
        state.gathering.unref();
      };
      state.rewait = wait;
      wait();
      if (!state.gathering) return;
    }
    // A process ending meanwhile leaves the chunks waiting, searchable: its next start's sweep merges them.
    state.gathering.unref();
  }

  private queueMerge(tenantId: string, state: MergeState): void {
    clearTimeout(state.gathering);
    state.gathering = undefined;
    state.rewait = undefined;
    if (this.stopping) return;
    this.mergeQueue.push(tenantId);
    this.startQueuedMerges();
  }

  private startQueuedMerges(): void {
    while (!this.stopping && this.runningMerges.size < MAX_CONCURRENT_MERGES && this.mergeQueue.length > 0) {
      const tenantId = this.mergeQueue.shift() as string;
      const running: Promise<void> = this.mergeTenant(tenantId).finally(() => {
        this.runningMerges.delete(running);
        this.startQueuedMerges();
      });
      this.runningMerges.add(running);
    }
  }

  /**
   * One turn of a tenant's merge: batches until none is full, at most MERGE_BATCHES_PER_TURN of
   * them; when chunks remain or arrived meanwhile, the tenant goes to the back of the queue, so a
   * tenant loading without pause never keeps a slot from the others. A batch that ran into the
   * statement timeout is halved for the tenant's next turns. Never rejects: a failure is logged and
   * the chunks stay waiting (queries still find them) for the next ingestion or sweep.
   */
  private async mergeTenant(tenantId: string): Promise<void> {
    const state = this.merges.get(tenantId) ?? { again: false, gathered: 0, lastArrival: performance.now() };
    state.again = false;
    state.gathered = 0;
    let busy = false;
    let failed = false;
    let fullTurn = false;
    try {
      for (let batch = 0; !this.stopping; batch++) {
        const size = this.mergeBatchSizes.get(tenantId) ?? this.mergeBatchChunks;
        const merged = await runWithTenant({ tenantId }, () =>
          tenantTransaction(this.dataSource, (manager) => this.repository.mergeUnmerged(manager, tenantId, size, this.waitingTerms), {
            settings: MERGE_SETTINGS,
          }),
        );
        if (merged === null) busy = true;
        if (merged === null || merged < size) break;
        if (batch + 1 >= MERGE_BATCHES_PER_TURN) {
          fullTurn = true;
          break;
        }
      }
    } catch (error) {
      failed = true;
      if (isStatementTimeout(error)) {
        if (this.mergeBatchSizes.size >= MAX_CACHED_TENANTS && !this.mergeBatchSizes.has(tenantId)) this.mergeBatchSizes.clear();
        this.mergeBatchSizes.set(
          tenantId,
          Math.max(Math.min(MIN_MERGE_BATCH_CHUNKS, this.mergeBatchChunks), Math.floor((this.mergeBatchSizes.get(tenantId) ?? this.mergeBatchChunks) / 2)),
        );
      }
      try {
        this.logger.error('Merging waiting chunks into the index failed; retrying later', { tenantId, error: String(error) });
      } catch {
        // A failing logger must not stop the merges of other tenants.
      }
    }
    if ((fullTurn || state.again) && !busy && !failed && !this.stopping) {
      // Still in `merges`: ingestions meanwhile only mark it again. Full batches wait: they go
      // straight back to the queue; chunks that arrived during the turn gather first.
      if (fullTurn) this.queueMerge(tenantId, state);
      else this.gatherOrQueue(tenantId, state, true);
      return;
    }
    this.merges.delete(tenantId);
    if (busy && !this.stopping) setTimeout(() => this.scheduleMerge(tenantId), BUSY_RETRY_MS).unref();
  }

  /** Starts a merge for every tenant with chunks left waiting (e.g. by a crash between an ingestion and its merge). */
  async sweepUnmerged(): Promise<number> {
    const tenants = await this.repository.tenantsWithUnmergedChunks(this.dataSource.manager, SWEEP_TENANTS);
    for (const tenantId of tenants) this.scheduleMerge(tenantId);
    return tenants.length;
  }

  /** Chunks of every tenant stored but not merged into the index yet: the merges' backlog. */
  unmergedChunks(): Promise<number> {
    return this.repository.unmergedChunkCount(this.dataSource.manager);
  }

  /** Waits for the merges under way and starts no more (their chunks would wait for the next start's sweep). */
  async stopMerging(): Promise<void> {
    this.stopping = true;
    this.mergeQueue.length = 0;
    for (const state of this.merges.values()) clearTimeout(state.gathering);
    await Promise.all([...this.runningMerges]);
    this.waitingTerms.clear();
    await this.analysis.close();
  }

  /**
   * A document with the tenant's quota (IngestDocumentCommandSchema). A bare document (a gateway
   * of an earlier version) is held to the smallest tier's quota: never to none.
   */
  async ingest(payload: unknown): Promise<IngestedDocumentView> {
    const command =
      payload !== null && typeof payload === 'object' && 'quota' in payload
        ? parseOrThrow(IngestDocumentCommandSchema, payload, 'Command')
        : { document: payload, quota: TIER_STORAGE.starter };
    const request = parseIngestDocument(command.document);
    const { tenantId } = currentTenant();
    const { document, chunks, stored } = await this.underWay(tenantId, async () => {
      const { key, hasher } = await this.indexKeyOf(tenantId);
      const analysed = await this.analysis.analyse(tenantId, key, hasher, request.content, request.title, this.settings.chunking);
      const indexed: IndexedChunk[] = analysed.map((chunk, ordinal) => ({ id: randomUUID(), ordinal, ...chunk }));
      const row: DocumentRow = {
        id: randomUUID(),
        tenantId,
        title: request.title,
        source: request.source ?? null,
        metadata: request.metadata ?? {},
        contentBytes: Buffer.byteLength(request.content, 'utf8'),
        chunkCount: indexed.length,
        createdAt: new Date(),
      };
      const written = await tenantTransaction(this.dataSource, (manager) => this.repository.insertDocument(manager, row, indexed, hasher.keyCheck(), command.quota));
      return { document: row, chunks: indexed, stored: written };
    });
    // Committed: the merge may take the chunks' terms from here instead of reading them back.
    if (!this.stopping) this.waitingTerms.add(tenantId, stored);
    this.scheduleMerge(tenantId, chunks.length);
    return { id: document.id, title: document.title, chunkCount: document.chunkCount, createdAt: document.createdAt.toISOString() };
  }

  /** Runs an ingestion of the tenant's, counted as under way meanwhile (a loading gather waits for it: quietTime). */
  private async underWay<T>(tenantId: string, ingestion: () => Promise<T>): Promise<T> {
    this.ingesting.set(tenantId, (this.ingesting.get(tenantId) ?? 0) + 1);
    try {
      return await ingestion();
    } finally {
      const left = (this.ingesting.get(tenantId) ?? 1) - 1;
      if (left > 0) this.ingesting.set(tenantId, left);
      else this.ingesting.delete(tenantId);
    }
  }

  /** What the current tenant stores: documents and bytes of content. */
  usage(): Promise<{ documents: number; bytes: number }> {
    const { tenantId } = currentTenant();
    return tenantTransaction(this.dataSource, (manager) => this.repository.usage(manager, tenantId));
  }

  async get(id: string): Promise<BrainDocumentView> {
    const { tenantId } = currentTenant();
    const row = await tenantTransaction(this.dataSource, (manager) => this.repository.findDocument(manager, tenantId, id));
    if (!row) throw DomainError.notFound('Document');
    return documentView(row);
  }

  /** Newest first. */
  async list(query: unknown): Promise<Page<BrainDocumentView>> {
    const { limit, cursor } = parseOrThrow(PageQuerySchema, query, 'Query');
    const after = cursor ? decodeCursor(cursor) : undefined;
    const { tenantId } = currentTenant();
    const rows = await tenantTransaction(this.dataSource, (manager) => this.repository.documentPage(manager, tenantId, limit, after));
    const items = rows.slice(0, limit);
    const last = items[items.length - 1];
    return {
      items: items.map(documentView),
      nextCursor: rows.length > limit && last ? encodeCursor({ at: last.createdAt.toISOString(), id: last.id }) : null,
    };
  }

  /** The document's passages in order, a page at a time; 404 for a document the tenant does not have. */
  async passages({ id, limit, cursor }: { id: string; limit: number; cursor?: string }): Promise<Page<PassageView>> {
    const after = cursor === undefined ? undefined : decodeSequenceCursor(cursor);
    const { tenantId } = currentTenant();
    const rows = await tenantTransaction(this.dataSource, (manager) => this.repository.passagePage(manager, tenantId, id, limit + 1, after));
    if (!rows) throw DomainError.notFound('Document');
    const items = rows.slice(0, limit);
    const last = items[items.length - 1];
    return { items, nextCursor: rows.length > limit && last ? encodeSequenceCursor(last.ordinal) : null };
  }

  /** Removes the document, its chunks and postings, and its share of the tenant's statistics, in one transaction. */
  async delete(id: string): Promise<{ id: string }> {
    const { tenantId } = currentTenant();
    const deleted = await tenantTransaction(this.dataSource, (manager) => this.repository.deleteDocument(manager, tenantId, id), { settings: DELETION_SETTINGS });
    if (!deleted) throw DomainError.notFound('Document');
    return { id };
  }

  /** The tenant's term hasher, kept while the process serves the tenant (bounded: the least recent go first). */
  private async hasherFor(tenantId: string): Promise<TermHasher> {
    return (await this.indexKeyOf(tenantId)).hasher;
  }

  /**
   * The tenant's blind-index key with its hasher, kept together: an analysis thread hashes with
   * the very key the hasher here (and its key check) uses.
   */
  private async indexKeyOf(tenantId: string): Promise<{ readonly key: Buffer; readonly hasher: TermHasher }> {
    let known = this.hashers.get(tenantId);
    if (known) {
      this.hashers.delete(tenantId);
    } else {
      const key = await this.keys.keyFor(tenantId);
      known = { key, hasher: new TermHasher(key) };
      if (this.hashers.size >= MAX_CACHED_TENANTS) this.hashers.delete(this.hashers.keys().next().value as string);
    }
    this.hashers.set(tenantId, known);
    return known;
  }

  async query(payload: unknown): Promise<BrainQueryResult> {
    const request = parseOrThrow(BrainQuerySchema, payload, 'Query');
    return { query: request.q, results: await this.search(request.q, request.k) };
  }

  /**
   * The `limit` best passages of the current tenant for `text`, best first. The public query caps
   * `limit` at 50; the evaluation reads deeper rankings through this method.
   */
  async search(text: string, limit: number): Promise<BrainResult[]> {
    const { tenantId } = currentTenant();
    const hasher = await this.hasherFor(tenantId);
    const queryFrequencies = new Map<string, number>();
    for (const [term, frequency] of termCounts(text)) {
      if (queryFrequencies.size >= MAX_QUERY_TERMS) break;
      const hash = hasher.hash(term);
      queryFrequencies.set(hash, (queryFrequencies.get(hash) ?? 0) + frequency);
    }
    // A query of stop words and punctuation only has nothing to look for: an empty ranking.
    if (queryFrequencies.size === 0) return [];

    // The statistics in a transaction of their own, one round trip (the statement goes with its
    // COMMIT): a query that matches nothing ends there. The ranking reads the blocks and the winners
    // in another, so one that matches sees a snapshot taken a moment later: weights from the
    // statistics' document frequencies, postings and texts from the ranking's (a document deleted
    // in between is left out whole; one whose chunks began waiting for a merge in between is not
    // read from there, as if the query had come a moment earlier).
    const stats = await tenantTransaction(this.dataSource, (manager) => this.repository.statistics(manager, tenantId, [...queryFrequencies.keys()]), {
      settings: RANKING_SETTINGS,
    });
    if (!stats || stats.chunkCount === 0) return [];
    if (stats.keyCheck !== hasher.keyCheck()) throw new IndexKeyMismatchError(tenantId);
    const weights = [...queryFrequencies]
      .filter(([hash]) => stats.documentFrequencies.has(hash))
      .map(([termHash, queryFrequency]) => {
        const documentFrequency = stats.documentFrequencies.get(termHash) ?? 0;
        return { termHash, documentFrequency, weight: termWeight(queryFrequency, stats.chunkCount, documentFrequency, this.settings.bm25) };
      });
    if (weights.length === 0) return [];
    const rows = await tenantTransaction(
      this.dataSource,
      (manager) => this.repository.rank(manager, tenantId, weights, lengthNormalisation(stats, this.settings.bm25), limit, stats.waiting),
      { settings: RANKING_SETTINGS },
    );
    return rows.map(resultView);
  }
}
