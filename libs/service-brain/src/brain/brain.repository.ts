import { setImmediate } from 'node:timers/promises';
import { EntityManager } from 'typeorm';
import { CursorPosition, DomainError, ErrorCode, isUuid, type PassageView, type StorageQuota } from '@mission/contracts';
import { isSealed, queryAndCommit, RecordCipher } from '@mission/persistence';
import {
  type ChunkTerms,
  contribution,
  decodePostings,
  type EncodedSegments,
  encodePostings,
  encodeSegmentsByTerm,
  type Normalisation,
  ScoreTable,
  selectSegments,
  wholeNumbers,
} from '../ranking/postings';
import { DEFAULT_PRUNING, planPruning, prunedRankingIsExact, type PruningOptions, type WeightedTerm } from '../ranking/pruning';
import { binaryBigintArray, binaryBigintValues, binaryIntArray, readBinaryBigintArray, readBinaryIntArray } from '../index/term-hashes';
import type { AnalysedChunk } from '../text/document-analysis';
import type { MergeInputs, StoredChunkTerms } from './waiting-chunk-terms';

export interface DocumentRow {
  readonly id: string;
  readonly tenantId: string;
  readonly title: string;
  readonly source: string | null;
  readonly metadata: Record<string, string>;
  readonly contentBytes: number;
  readonly chunkCount: number;
  readonly createdAt: Date;
}

/** A chunk ready to be written: its distinct term hashes (pairs of halves: index/term-hashes.ts) with their frequencies, and its length in terms. */
export interface IndexedChunk extends AnalysedChunk {
  readonly id: string;
  readonly ordinal: number;
}

/** A whole number as PostgreSQL reads it in an array literal: digits, an optional minus. */
const INTEGER = /^-?\d{1,20}$/;

/**
 * A PostgreSQL array literal (`{1,-2,3}`) of whole numbers, for `$n::bigint[]` / `$n::int[]`
 * parameters. node-postgres would quote and escape every element of a JavaScript array, a sixth of
 * the service's CPU while it ingests; integers need neither. Anything else is refused, never sent.
 */
export function integerArrayLiteral(values: ReadonlyArray<string | number>): string {
  for (const value of values) {
    if (typeof value === 'number' ? !Number.isSafeInteger(value) : !INTEGER.test(value)) throw new TypeError(`Not a whole number: ${String(value).slice(0, 32)}`);
  }
  return `{${values.join(',')}}`;
}

/** The halves of the terms of `segments`, in order, as binaryBigintArray takes them. */
function termPairs(segments: ReadonlyArray<{ readonly high: number; readonly low: number }>): Int32Array {
  const pairs = new Int32Array(2 * segments.length);
  for (const [index, segment] of segments.entries()) {
    pairs[2 * index] = segment.high;
    pairs[2 * index + 1] = segment.low;
  }
  return pairs;
}

/** An open-addressing set of hashes' halves, made anew per check only when too small: assertIndexable's. */
let seenHighs = new Int32Array(1024);
let seenLows = new Int32Array(1024);
let seenMarks = new Int32Array(1024);
let seenMark = 0;

/**
 * Refuses a chunk a merge would fail on at every try, or rank wrongly: as many frequencies as
 * hashes, each at least one, and each hash once.
 */
export function assertIndexable(chunk: Pick<IndexedChunk, 'ordinal' | 'hashes' | 'frequencies'>): void {
  const { hashes, frequencies } = chunk;
  if (hashes.length !== 2 * frequencies.length) throw new Error(`Chunk ${chunk.ordinal} has ${hashes.length / 2} terms and ${frequencies.length} frequencies`);
  for (const tf of frequencies) if (tf < 1) throw new Error(`Chunk ${chunk.ordinal} has a term frequency below one`);
  let size = seenMarks.length;
  while (size < 2 * frequencies.length) size *= 2;
  if (size !== seenMarks.length || seenMark === 0x7fffffff) {
    [seenHighs, seenLows, seenMarks] = [new Int32Array(size), new Int32Array(size), new Int32Array(size)];
    seenMark = 0;
  }
  const mark = ++seenMark;
  const shift = 32 - Math.log2(size);
  for (let index = 0; index < frequencies.length; index++) {
    const high = hashes[2 * index] as number;
    const low = hashes[2 * index + 1] as number;
    let at = Math.imul(high ^ Math.imul(low, 0x85ebca6b), 0x9e3779b1) >>> shift;
    while (seenMarks[at] === mark) {
      if (seenHighs[at] === high && seenLows[at] === low) throw new Error(`Chunk ${chunk.ordinal} lists a term twice`);
      at = (at + 1) & (size - 1);
    }
    seenMarks[at] = mark;
    seenHighs[at] = high;
    seenLows[at] = low;
  }
}

export interface TenantIndexStatistics {
  readonly chunkCount: number;
  readonly totalLength: number;
  readonly keyCheck: string;
  /** Document frequency by term hash, for the terms asked about that occur. */
  readonly documentFrequencies: ReadonlyMap<string, number>;
  /** Whether a chunk waiting for a merge holds one of those terms (rank must then read the waiting chunks too). */
  readonly waiting: boolean;
}

export interface RankedChunkRow {
  readonly chunkId: string;
  readonly documentId: string;
  readonly title: string;
  readonly text: string;
  readonly source: string | null;
  readonly score: number;
}

/** Raised when a tenant's index was built with another blind-index key than the one configured. */
export class IndexKeyMismatchError extends Error {
  constructor(tenantId: string) {
    super(`The brain index of tenant ${tenantId} was built with another blind-index key; the configured BRAIN_INDEX_KEY must not change`);
    this.name = 'IndexKeyMismatchError';
  }
}

/** One term's contribution as an integer of 1e-9 units, as SQL computes it ($4, $5: the normalisation; ranking/postings.ts `contribution` in the service). */
export const CONTRIBUTION = (weight: string, tf: string, length: string): string => `round(${weight} * ${tf} / (${tf} + $4::float8 + $5::float8 * ${length}) * 1e9::float8)`;

/**
 * The posting blocks of the terms $2, as stored (coded: ranking/postings.ts), one index range scan
 * per term. In base64: node-postgres reads a bytea's hex text about ten times slower than Node
 * decodes base64 (4 ms against 0.3 for 700 kB here), and base64 is a third shorter. The format
 * is a parameter ($3, 'base64'): a statement without string constants can be inlined, so it goes
 * in the message that opens the ranking's transaction.
 */
const BLOCKS = `SELECT term_hash::text AS term, size, encode(postings, $3::text) AS postings, NULL::text AS seq, NULL::int AS tf, NULL::int AS length
       FROM brain.posting_blocks WHERE tenant_id = $1 AND term_hash = ANY($2::bigint[])`;

/** The blocks, and the postings of the chunks waiting for a merge that hold one of the terms. */
const BLOCKS_AND_WAITING = `${BLOCKS}
       UNION ALL
       SELECT u.term_hash::text, NULL, NULL, c.seq::text, u.tf, c.length
       FROM brain.unmerged_chunks m
       JOIN brain.chunks c ON c.seq = m.chunk_seq AND c.tenant_id = $1
       CROSS JOIN LATERAL unnest(c.term_hashes, c.term_frequencies) AS u(term_hash, tf)
       WHERE m.tenant_id = $1 AND u.term_hash = ANY($2::bigint[])`;

/** Each winner `s` (its `chunk_seq`) joined to its text and document by primary key. */
const WINNER_COLUMNS = `c.id AS "chunkId", c.document_id AS "documentId", d.sealed, d.title, c.text, d.source`;
const WINNER_TEXT = `CROSS JOIN LATERAL (SELECT id, document_id, text FROM brain.chunks WHERE seq = s.chunk_seq AND tenant_id = $1 OFFSET 0) c
       CROSS JOIN LATERAL (SELECT sealed, title, source FROM brain.documents WHERE id = c.document_id AND tenant_id = $1 OFFSET 0) d`;

/** The chunks $2 (the winners, best first) with their text and document, in that order. */
const WINNERS = `SELECT ${WINNER_COLUMNS}, s.position
       FROM unnest($2::bigint[]) WITH ORDINALITY AS s(chunk_seq, position)
       ${WINNER_TEXT}
       ORDER BY s.position`;

/**
 * The candidates $2 (chunks holding an essential term) with what the essential terms give them
 * ($3, in 1e-9 units), completed by the other terms ($7, $8) looked up in each candidate's own
 * list of terms (see planPruning; the caller checks that the result is exact); the best $6 with
 * their text and document.
 */
const PRUNED_RANKING = `WITH scored AS (
         SELECT e.chunk_seq, (e.part + coalesce((
             SELECT sum(${CONTRIBUTION('r.weight', 'c.term_frequencies[x.position]', 'c.length')})
             FROM unnest($7::bigint[], $8::float8[]) AS r(term_hash, weight)
             CROSS JOIN LATERAL (SELECT array_position(c.term_hashes, r.term_hash) AS position) x
             WHERE x.position IS NOT NULL
           ), 0)) / 1e9::float8 AS score
         FROM unnest($2::bigint[], $3::float8[]) AS e(chunk_seq, part)
         JOIN brain.chunks c ON c.seq = e.chunk_seq AND c.tenant_id = $1
         ORDER BY score DESC, e.chunk_seq
         LIMIT $6
       )
       SELECT ${WINNER_COLUMNS}, s.score
       FROM scored s
       ${WINNER_TEXT}
       ORDER BY s.score DESC, s.chunk_seq`;

/**
 * Postings one ranking sums in the service at most (the document frequencies of the terms it
 * reads in full): about half a second of work, and a score table of 128 MiB (sized for every
 * posting to be of a different chunk, so it never grows). A query past it is refused (400)
 * instead of holding the service. It is also what all the rankings of a process sum at once (their
 * tables take about 160 MiB together at most): one waits for the others' postings to be summed
 * when they would pass it together.
 */
export const MAX_RANKED_POSTINGS = 4_000_000;

/** A budget taken in amounts: a taker waits (first come, first served) until its amount is free. */
class WeightedBudget {
  private available: number;
  private readonly waiting: Array<{ amount: number; wake: () => void }> = [];

  constructor(readonly total: number) {
    this.available = total;
  }

  async take(amount: number): Promise<void> {
    if (this.waiting.length === 0 && amount <= this.available) {
      this.available -= amount;
      return;
    }
    await new Promise<void>((wake) => this.waiting.push({ amount, wake }));
  }

  give(amount: number): void {
    this.available += amount;
    for (let next = this.waiting[0]; next && next.amount <= this.available; next = this.waiting[0]) {
      this.waiting.shift();
      this.available -= next.amount;
      next.wake();
    }
  }
}

/** Postings summed between two returns to the event loop (about 10 ms of work). */
const POSTINGS_PER_TURN = 100_000;

type RankedRow = Omit<RankedChunkRow, 'title' | 'source' | 'score'> & { sealed: string | null; title: string | null; source: string | null };

const CHUNK_BATCH = 1_000;

/**
 * Chunks merged into posting blocks by one merge at most: bounds a block's arrays and a merge's
 * transaction. A merge writes a block for each distinct term of its batch, so under a bulk load
 * twice the batch writes about half the blocks for the same chunks: with 16,384 instead of 8,192,
 * a quarter less of PostgreSQL's CPU per MB ingested and about a tenth more MB/s, for about 85 MiB
 * more resident memory at the peak of a load (bench/README.md, "Brain ingestion: hashes in binary,
 * analysis on a thread").
 */
export const MERGE_BATCH_CHUNKS = 16_384;

/**
 * The settings of a deletion's transaction (tenantTransaction's `settings`): no sequential scans
 * where an index serves. Every access here is by tenant and key; straight after a bulk load,
 * before autovacuum's ANALYZE, the planner takes the index tables for nearly empty and would
 * otherwise scan a whole table once per term (seen: a merge's append of a few thousand terms ran
 * for minutes, a nested loop over sequential scans). Set with the transaction's opening, not by a
 * statement inside it, so the plans PostgreSQL keeps for its prepared statements are made under
 * them and serve only transactions with the same settings.
 */
export const DELETION_SETTINGS: Readonly<Record<string, string>> = { enable_seqscan: 'off' };

/** A merge's settings: as a deletion's, with memory to group a batch's postings and at most 120 s a statement. */
export const MERGE_SETTINGS: Readonly<Record<string, string>> = { ...DELETION_SETTINGS, work_mem: '32MB', statement_timeout: '120s' };

/**
 * The settings of a query's transaction (statistics, then ranking; tenantTransaction's
 * `settings`, sent with the tenant): no JIT compilation (cheap per row, but it can look expensive
 * to the planner, and compiling would cost more than running it), no memoizing of the per-term
 * scans (each term is scanned once), memory enough to sort the waiting chunks' postings or a
 * pruned ranking's candidates without spilling to disk, index access only (as DELETION_SETTINGS),
 * and no parallel workers: straight after a bulk load, statistics sampled while chunks waited for
 * their merge made the planner start workers for the waiting chunks' branch, about 6 ms a query
 * for a branch that found none waiting and read nothing.
 */
export const RANKING_SETTINGS: Readonly<Record<string, string>> = {
  jit: 'off',
  enable_memoize: 'off',
  work_mem: '32MB',
  enable_seqscan: 'off',
  max_parallel_workers_per_gather: '0',
};

/** The tenant's ($1) merge lock: a merge tries it, a deletion waits for it, so the two take turns. */
const TENANT_MERGE_LOCK = `hashtextextended('brain.merge:' || $1::text, 0)`;

/** Merges of at most this many chunks append to small blocks; larger ones only make new blocks. */
const APPEND_BATCH_CHUNKS = 256;

/** A term's newest block takes the postings of later merges while it holds at most this many (an append rewrites it: ≤ 1 KiB). */
const SMALL_BLOCK = 128;

/** Blocks written per statement by a merge or a deletion, at most, and their coded postings' bytes at most (a statement's parameters stay within a few MB). */
const WRITE_BATCH_BLOCKS = 5_000;
const WRITE_BATCH_BYTES = 2 * 1024 * 1024;

const DOCUMENT_COLUMNS = `id, tenant_id AS "tenantId", sealed, title, source, metadata, content_bytes AS "contentBytes", chunk_count AS "chunkCount", created_at AS "createdAt"`;

/** What the tenant wrote about a document: stored only as ciphertext (`documents.sealed`). */
type DocumentContent = Pick<DocumentRow, 'title' | 'source' | 'metadata'>;
type StoredDocument = Omit<DocumentRow, keyof DocumentContent> & { sealed: string | null; title: string | null; source: string | null; metadata: Record<string, string> | null };

/**
 * The only code that touches the brain schema. Every statement is filtered by tenant. Writers of
 * a tenant's totals take a per-tenant transaction lock first, and merges and deletions (the
 * writers of posting blocks) another, so concurrent ingestions, merges
 * and deletions of one tenant never deadlock on those rows, and once the merges are done the
 * statistics and the blocks always equal what the chunks hold.
 */
export class BrainRepository {
  /** Seals document content and chunk texts on the way in, opens them on the way out: the database holds neither in clear. */
  /** How rankings went since start: pruned (the long posting lists skipped), or ranked in full after a pruned try. */
  readonly pruningOutcomes = { pruned: 0, rankedInFull: 0 };

  /** The postings this process's rankings sum at once (MAX_RANKED_POSTINGS). */
  private readonly rankingBudget: WeightedBudget;

  constructor(
    private readonly cipher: RecordCipher,
    private readonly pruning: PruningOptions = DEFAULT_PRUNING,
    private readonly maxRankedPostings: number = MAX_RANKED_POSTINGS,
  ) {
    this.rankingBudget = new WeightedBudget(maxRankedPostings);
  }

  /**
   * Stores a document with its passages, their terms, and a place in unmerged_chunks (a merge
   * later writes them into posting blocks: mergeUnmerged), and adds them to the tenant's totals.
   * With a quota, refuses (QuotaExceeded, the transaction rolls back) when the tenant
   * would hold more documents or bytes than it allows: checked under the tenant's statistics lock,
   * so concurrent ingestions cannot pass it together. Returns what a merge needs of each stored
   * chunk (its seq, id, length and the array texts written), for the service to keep until its merge
   * once the transaction has committed (WaitingChunkTerms).
   */
  async insertDocument(manager: EntityManager, document: DocumentRow, chunks: readonly IndexedChunk[], keyCheck: string, quota?: StorageQuota): Promise<StoredChunkTerms[]> {
    const content: DocumentContent = { title: document.title, source: document.source, metadata: document.metadata };
    await manager.query(`INSERT INTO brain.documents (id, tenant_id, sealed, content_bytes, chunk_count, created_at) VALUES ($1, $2, $3, $4, $5, $6)`, [
      document.id,
      document.tenantId,
      await this.cipher.seal(manager, { table: 'documents', id: document.id }, content),
      document.contentBytes,
      document.chunkCount,
      document.createdAt,
    ]);
    // The chunks wait in unmerged_chunks until a merge (mergeUnmerged) writes them into posting blocks.
    // What a merge needs of every chunk (it would otherwise fail on it at every try): a frequency of
    // at least one for each of its terms, and each term once.
    for (const chunk of chunks) assertIndexable(chunk);
    const stored: StoredChunkTerms[] = [];
    for (let start = 0; start < chunks.length; start += CHUNK_BATCH) {
      const batch = chunks.slice(start, start + CHUNK_BATCH);
      // The sealed texts joined by commas, as the bytes the statement splits (sealAllJoined).
      const texts = await this.cipher.sealAllJoined(
        manager,
        batch.map((chunk) => ({ record: { table: 'chunks', id: chunk.id }, value: chunk.text })),
      );
      // One statement of fixed text (prepared once per connection) whatever the chunks: their
      // columns as arrays, the term hashes and frequencies of all of them as one binary array
      // each (term-hashes.ts), cut per chunk.
      let terms = 0;
      for (const chunk of batch) terms += chunk.frequencies.length;
      const allHashes = new Int32Array(2 * terms);
      const allFrequencies = new Int32Array(terms);
      const firsts = new Int32Array(batch.length);
      const lasts = new Int32Array(batch.length);
      const byOrdinal = new Map<number, IndexedChunk>();
      let count = 0;
      for (const [index, chunk] of batch.entries()) {
        byOrdinal.set(chunk.ordinal, chunk);
        allHashes.set(chunk.hashes, 2 * count);
        allFrequencies.set(chunk.frequencies, count);
        firsts[index] = count + 1;
        count += chunk.frequencies.length;
        lasts[index] = count;
      }
      const seqs: Array<{ seq: string; ordinal: number }> = await manager.query(
        `WITH stored AS (
           INSERT INTO brain.chunks (id, tenant_id, document_id, ordinal, text, length, term_hashes, term_frequencies)
           SELECT u.id, $1::uuid, $2::uuid, u.ordinal, u.text, u.length, ($7::bigint[])[u.first:u.last], ($8::int[])[u.first:u.last]
           FROM unnest($3::uuid[], $4::int[], string_to_array($5::text, ','), $6::int[], $9::int[], $10::int[]) AS u(id, ordinal, text, length, first, last)
           RETURNING seq, ordinal
         ), waiting AS (
           INSERT INTO brain.unmerged_chunks (tenant_id, chunk_seq) SELECT $1::uuid, seq FROM stored
         )
         SELECT seq::text AS seq, ordinal FROM stored`,
        [
          document.tenantId,
          document.id,
          batch.map((chunk) => chunk.id),
          binaryIntArray(batch.map((chunk) => chunk.ordinal)),
          texts,
          binaryIntArray(batch.map((chunk) => chunk.length)),
          binaryBigintArray(allHashes),
          binaryIntArray(allFrequencies),
          binaryIntArray(firsts),
          binaryIntArray(lasts),
        ],
      );
      for (const { seq, ordinal } of seqs) {
        const chunk = byOrdinal.get(ordinal);
        if (chunk) stored.push({ seq: Number(seq), id: chunk.id, length: chunk.length, hashes: chunk.hashes, frequencies: chunk.frequencies });
      }
    }

    // The statistics lock, the totals and what they come to, in one round trip: other ingestions of
    // the tenant wait from here until this one commits, so the fewer round trips in between, the
    // less they wait. Counted first and checked against the quota after: past it, the error rolls
    // the whole transaction back. The CTE is MATERIALIZED and read by the INSERT, so the lock is
    // taken before the row it produces.
    const totalLength = chunks.reduce((sum, chunk) => sum + chunk.length, 0);
    const [totals]: Array<{ documents: string; bytes: string }> = await manager.query(
      `WITH statistics_lock AS MATERIALIZED (SELECT pg_advisory_xact_lock(hashtextextended('brain.statistics:' || $6::text, 0)))
       INSERT INTO brain.tenant_stats (tenant_id, document_count, chunk_count, total_length, content_bytes, key_check, updated_at)
       SELECT $1::uuid, 1, $2::bigint, $3::bigint, $5::bigint, $4::bigint, clock_timestamp() FROM statistics_lock
       ON CONFLICT (tenant_id) DO UPDATE SET
         document_count = brain.tenant_stats.document_count + 1,
         chunk_count = brain.tenant_stats.chunk_count + EXCLUDED.chunk_count,
         total_length = brain.tenant_stats.total_length + EXCLUDED.total_length,
         content_bytes = brain.tenant_stats.content_bytes + EXCLUDED.content_bytes,
         updated_at = EXCLUDED.updated_at
       WHERE brain.tenant_stats.key_check = EXCLUDED.key_check
       RETURNING document_count::text AS documents, content_bytes::text AS bytes`,
      [document.tenantId, chunks.length, totalLength, keyCheck, document.contentBytes, document.tenantId],
    );
    if (!totals) throw new IndexKeyMismatchError(document.tenantId);
    if (quota) assertWithinQuota({ documents: Number(totals.documents) - 1, bytes: Number(totals.bytes) - document.contentBytes }, document.contentBytes, quota);
    return stored;
  }

  /**
   * Deletes a document with its chunks and index entries, and takes them out of the statistics.
   * False when there is no such document. Its chunks still waiting for a merge just leave
   * unmerged_chunks; the merged ones leave the posting blocks that hold them (a block left empty
   * goes), and so the document frequencies. Takes the tenant's merge lock first, so no merge runs
   * meanwhile. For a transaction opened with DELETION_SETTINGS.
   */
  async deleteDocument(manager: EntityManager, tenantId: string, id: string): Promise<boolean> {
    if (!isUuid(id)) return false;
    await this.lockTenantMerges(manager, tenantId);
    const found: Array<{ content_bytes: number }> = await manager.query(`SELECT content_bytes FROM brain.documents WHERE tenant_id = $1 AND id = $2 FOR UPDATE`, [tenantId, id]);
    if (found.length === 0) return false;
    const [chunks]: Array<{ seqs: string | null; count: string; length: string; first: string | null; last: string | null }> = await manager.query(
      `WITH waiting AS (
         DELETE FROM brain.unmerged_chunks m USING brain.chunks c
         WHERE m.tenant_id = $1 AND c.tenant_id = $1 AND c.document_id = $2 AND m.chunk_seq = c.seq
         RETURNING m.chunk_seq
       )
       SELECT array_agg(c.seq) FILTER (WHERE w.chunk_seq IS NULL)::text AS seqs, min(c.seq) FILTER (WHERE w.chunk_seq IS NULL) AS first,
              max(c.seq) FILTER (WHERE w.chunk_seq IS NULL) AS last, count(*) AS count, coalesce(sum(c.length), 0) AS length
       FROM brain.chunks c LEFT JOIN waiting w ON w.chunk_seq = c.seq
       WHERE c.tenant_id = $1 AND c.document_id = $2`,
      [tenantId, id],
    );
    const merged = chunks?.seqs ?? null;
    if (merged !== null) {
      // The merged chunks' terms, each with the number of them holding it.
      const terms = `SELECT u.term_hash, count(*)::int AS n FROM brain.chunks c CROSS JOIN LATERAL unnest(c.term_hashes) AS u(term_hash)
                     WHERE c.tenant_id = $1 AND c.seq = ANY($2::bigint[]) GROUP BY u.term_hash`;
      await this.removeFromBlocks(manager, tenantId, terms, merged, chunks?.first, chunks?.last);
    }
    await this.lockTenantStatistics(manager, tenantId);
    await manager.query(`DELETE FROM brain.documents WHERE tenant_id = $1 AND id = $2`, [tenantId, id]);
    await manager.query(
      `UPDATE brain.tenant_stats SET document_count = document_count - 1, chunk_count = chunk_count - $2, total_length = total_length - $3,
         content_bytes = greatest(content_bytes - $4, 0), updated_at = clock_timestamp()
       WHERE tenant_id = $1`,
      [tenantId, Number(chunks?.count ?? 0), Number(chunks?.length ?? 0), Number(found[0]?.content_bytes ?? 0)],
    );
    return true;
  }

  /**
   * Takes the chunks `seqs` (between `first` and `last`) out of the posting blocks of `terms` (a
   * query of their term hashes) that hold them: each such block is read, rewritten without them
   * as one segment, or deleted when nothing is left. Under the tenant's merge lock.
   */
  private async removeFromBlocks(
    manager: EntityManager,
    tenantId: string,
    terms: string,
    seqs: string,
    first: string | null | undefined,
    last: string | null | undefined,
  ): Promise<void> {
    const blocks: Array<{ term: string; block: string; postings: Buffer }> = await manager.query(
      `WITH terms AS (${terms})
       SELECT b.term_hash::text AS term, b.block::text AS block, b.postings FROM brain.posting_blocks b
       WHERE b.tenant_id = $1 AND b.term_hash IN (SELECT term_hash FROM terms) AND b.block <= $4 AND b.last_seq >= $3`,
      [tenantId, seqs, first, last],
    );
    const removed = new Set(wholeNumbers(seqs));
    const emptied: Array<{ term: string; block: string }> = [];
    const rewritten: Array<{ term: string; block: string; size: number; postings: Buffer }> = [];
    for (const block of blocks) {
      const postings = decodePostings(block.postings);
      const kept = { seqs: [] as number[], frequencies: [] as number[], lengths: [] as number[] };
      postings.seqs.forEach((seq, index) => {
        if (removed.has(seq)) return;
        kept.seqs.push(seq);
        kept.frequencies.push(postings.frequencies[index] as number);
        kept.lengths.push(postings.lengths[index] as number);
      });
      if (kept.seqs.length === postings.seqs.length) continue;
      if (kept.seqs.length === 0) emptied.push(block);
      else rewritten.push({ term: block.term, block: block.block, size: kept.seqs.length, postings: encodePostings(kept) });
    }
    for (const part of slices(emptied, () => 0)) {
      await manager.query(
        `DELETE FROM brain.posting_blocks b USING unnest($2::bigint[], $3::bigint[]) AS u(term_hash, block)
         WHERE b.tenant_id = $1 AND b.term_hash = u.term_hash AND b.block = u.block`,
        [tenantId, part.map((block) => block.term), part.map((block) => block.block)],
      );
    }
    for (const part of slices(rewritten, (block) => block.postings.length)) {
      await manager.query(
        `UPDATE brain.posting_blocks b SET size = u.size, postings = u.postings
         FROM unnest($2::bigint[], $3::bigint[], $4::int[], $5::bytea[]) AS u(term_hash, block, size, postings)
         WHERE b.tenant_id = $1 AND b.term_hash = u.term_hash AND b.block = u.block`,
        [tenantId, part.map((block) => block.term), part.map((block) => block.block), part.map((block) => block.size), part.map((block) => block.postings)],
      );
    }
  }

  /**
   * Writes up to `maxChunks` of the tenant's chunks waiting in unmerged_chunks (the oldest first)
   * into posting blocks (whose sizes are the terms' document frequencies), in the caller's
   * transaction, under the tenant's merge lock (so merges and deletions of one tenant take
   * turns; ingestion does not wait for them). A term's postings go into a new block, or, in a
   * merge of a few chunks (APPEND_BATCH_CHUNKS), are appended to the term's newest block while that
   * stays within SMALL_BLOCK postings: documents merged one at a time (a trickle of small ones)
   * then fill blocks of up to that many instead of leaving one tiny block per document. Returns
   * the chunks merged, or null when another merge of the tenant holds the lock (it will take these
   * chunks, or the caller tries again later). The chunks' terms come from `inputs` where it holds
   * them for the same chunk (taken from it as the merge begins: should the transaction fail, the
   * next merge reads them back), from `chunks` otherwise. For a transaction opened with MERGE_SETTINGS.
   */
  async mergeUnmerged(manager: EntityManager, tenantId: string, maxChunks: number = MERGE_BATCH_CHUNKS, inputs?: MergeInputs): Promise<number | null> {
    const [lock]: Array<{ locked: boolean }> = await manager.query(`SELECT pg_try_advisory_xact_lock(${TENANT_MERGE_LOCK}) AS locked`, [tenantId]);
    if (!lock?.locked) return null;
    // In a WITH: TypeORM answers a bare DELETE with its rows and count, a SELECT with its rows.
    // With each chunk's id (not its terms): what `inputs` holds is used only for the chunk it was stored as.
    const taken: Array<{ seq: string; id: string }> = await manager.query(
      `WITH taken AS (
         DELETE FROM brain.unmerged_chunks
         WHERE tenant_id = $1 AND chunk_seq IN (SELECT chunk_seq FROM brain.unmerged_chunks WHERE tenant_id = $1 ORDER BY chunk_seq LIMIT $2)
         RETURNING chunk_seq
       )
       SELECT c.seq::text AS seq, c.id FROM taken JOIN brain.chunks c ON c.seq = taken.chunk_seq AND c.tenant_id = $1`,
      [tenantId, maxChunks],
    );
    // The chunks this process stored come from `inputs`, as written; only the others are read back.
    const batch: ChunkTerms[] = [];
    const unknown: string[] = [];
    for (const { seq, id } of taken) {
      const known = inputs?.take(tenantId, Number(seq), id);
      if (known) batch.push(known);
      else unknown.push(seq);
    }
    if (unknown.length > 0) {
      // In PostgreSQL's binary form (array_send), base64 for the transfer: no decimal text either way.
      const read: Array<{ seq: string; length: number; terms: string; frequencies: string }> = await manager.query(
        `SELECT c.seq::text AS seq, c.length, encode(array_send(c.term_hashes), 'base64') AS terms, encode(array_send(c.term_frequencies), 'base64') AS frequencies
         FROM brain.chunks c WHERE c.tenant_id = $1 AND c.seq = ANY($2::bigint[])`,
        [tenantId, integerArrayLiteral(unknown)],
      );
      for (const chunk of read) {
        batch.push({
          seq: Number(chunk.seq),
          length: chunk.length,
          hashes: readBinaryBigintArray(Buffer.from(chunk.terms, 'base64')),
          frequencies: readBinaryIntArray(Buffer.from(chunk.frequencies, 'base64')),
        });
      }
    }
    if (batch.length === 0) return 0;
    batch.sort((a, b) => a.seq - b.seq);
    // The batch's postings per term, in chunk order, each term's segment in one buffer.
    let encoded = encodeSegmentsByTerm(batch);
    // A small batch (documents arriving one at a time): each term's newest block takes the batch's
    // segment of the term (appended: the blocks are sequences of segments) while it has room. A
    // large batch (a bulk load) makes blocks of its own: appending would rewrite a small block for
    // nearly every rare word of the batch.
    if (batch.length <= APPEND_BATCH_CHUNKS) {
      const segments = Array.from({ length: encoded.count }, (_, index) => ({
        index,
        high: encoded.pairs[2 * index] as number,
        low: encoded.pairs[2 * index + 1] as number,
        first: encoded.firsts[index] as number,
        last: encoded.lasts[index] as number,
        size: encoded.sizes[index] as number,
        bytes: encoded.bytes.subarray(encoded.offsets[index], encoded.offsets[index + 1]),
      }));
      // Each term's newest block, by the term's place in `segments` (1-based).
      const newest: Array<{ position: string; block: string; size: number }> = await manager.query(
        `SELECT t.position::text AS position, b.block::text AS block, b.size
         FROM unnest($2::bigint[]) WITH ORDINALITY AS t(term_hash, position)
         CROSS JOIN LATERAL (SELECT block, size FROM brain.posting_blocks WHERE tenant_id = $1 AND term_hash = t.term_hash ORDER BY block DESC LIMIT 1) b`,
        [tenantId, binaryBigintArray(encoded.pairs)],
      );
      const into = new Map(newest.map((row) => [segments[Number(row.position) - 1], row]));
      const appended = segments.filter((segment) => (into.get(segment)?.size ?? Infinity) + segment.size <= SMALL_BLOCK);
      for (const part of slices(appended, (segment) => segment.bytes.length)) {
        await manager.query(
          `UPDATE brain.posting_blocks b
           SET block = least(b.block, u.first), last_seq = greatest(b.last_seq, u.last), size = b.size + u.size, postings = b.postings || u.postings
           FROM unnest($2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[], $6::int[], $7::bytea[]) AS u(term_hash, block, first, last, size, postings)
           WHERE b.tenant_id = $1 AND b.term_hash = u.term_hash AND b.block = u.block`,
          [
            tenantId,
            binaryBigintArray(termPairs(part)),
            part.map((segment) => into.get(segment)?.block),
            part.map((segment) => segment.first),
            part.map((segment) => segment.last),
            part.map((segment) => segment.size),
            part.map((segment) => segment.bytes),
          ],
        );
      }
      const done = new Set(appended);
      encoded = selectSegments(
        encoded,
        segments.filter((segment) => !done.has(segment)).map((segment) => segment.index),
      );
    }
    // The new blocks, a few thousand per statement: their postings as one binary parameter (a
    // slice of the merge's one buffer, not a copy), each block's cut from it by offset; an array of
    // bytea would travel as hex text, escaped element by element (about 5 % of the process's work
    // under a bulk load), and be parsed back from hex by PostgreSQL.
    for (const [from, to] of writeRanges(encoded)) {
      const base = encoded.offsets[from] as number;
      const starts = new Int32Array(to - from);
      const lengths = new Int32Array(to - from);
      for (let index = from; index < to; index++) {
        starts[index - from] = (encoded.offsets[index] as number) - base + 1;
        lengths[index - from] = (encoded.offsets[index + 1] as number) - (encoded.offsets[index] as number);
      }
      await manager.query(
        `INSERT INTO brain.posting_blocks (tenant_id, term_hash, block, last_seq, size, postings)
         SELECT $1::uuid, u.term_hash, u.first, u.last, u.size, substring($6::bytea FROM u.start FOR u.bytes)
         FROM unnest($2::bigint[], $3::bigint[], $4::bigint[], $5::int[], $7::int[], $8::int[]) AS u(term_hash, first, last, size, start, bytes)`,
        [
          tenantId,
          binaryBigintArray(encoded.pairs.subarray(2 * from, 2 * to)),
          binaryBigintValues(encoded.firsts.subarray(from, to)),
          binaryBigintValues(encoded.lasts.subarray(from, to)),
          binaryIntArray(encoded.sizes.subarray(from, to)),
          encoded.bytes.subarray(base, encoded.offsets[to]),
          binaryIntArray(starts),
          binaryIntArray(lengths),
        ],
      );
    }
    return batch.length;
  }

  /** Chunks of every tenant waiting for a merge (a SECURITY DEFINER function that returns only the count). */
  async unmergedChunkCount(manager: EntityManager): Promise<number> {
    const [row]: Array<{ n: string }> = await manager.query(`SELECT brain.unmerged_chunk_count() AS n`);
    return Number(row?.n ?? 0);
  }

  /** Tenants with chunks waiting for a merge (every tenant's, through a SECURITY DEFINER function that returns only their ids). */
  async tenantsWithUnmergedChunks(manager: EntityManager, limit: number): Promise<string[]> {
    const rows: Array<{ tenant_id: string }> = await manager.query(`SELECT tenant_id FROM brain.tenants_with_unmerged_chunks($1)`, [limit]);
    return rows.map((row) => row.tenant_id);
  }

  async findDocument(manager: EntityManager, tenantId: string, id: string): Promise<DocumentRow | null> {
    if (!isUuid(id)) return null;
    const rows: StoredDocument[] = await manager.query(`SELECT ${DOCUMENT_COLUMNS} FROM brain.documents WHERE tenant_id = $1 AND id = $2`, [tenantId, id]);
    return rows[0] ? this.openDocument(manager, rows[0]) : null;
  }

  /**
   * Up to `limit` passages of the document in order, after ordinal `after`, opened; null when the
   * tenant has no such document.
   */
  async passagePage(manager: EntityManager, tenantId: string, documentId: string, limit: number, after?: number): Promise<PassageView[] | null> {
    if (!isUuid(documentId)) return null;
    const found: unknown[] = await manager.query(`SELECT 1 FROM brain.documents WHERE tenant_id = $1 AND id = $2`, [tenantId, documentId]);
    if (found.length === 0) return null;
    const rows: Array<{ id: string; ordinal: number; text: string }> = await manager.query(
      `SELECT id, ordinal, text FROM brain.chunks WHERE tenant_id = $1 AND document_id = $2 AND ordinal > $3 ORDER BY ordinal LIMIT $4`,
      [tenantId, documentId, after ?? -1, limit],
    );
    const passages: PassageView[] = [];
    // One at a time: a key not cached yet is read on the transaction's one connection.
    for (const row of rows) {
      const text = isSealed(row.text) ? await this.cipher.open<string>(manager, { table: 'chunks', id: row.id }, row.text) : row.text;
      passages.push({ chunkId: row.id, ordinal: row.ordinal, text });
    }
    return passages;
  }

  /** Newest first, after `after` in (created_at, id) order; one extra row tells whether more follow. */
  async documentPage(manager: EntityManager, tenantId: string, limit: number, after?: CursorPosition): Promise<DocumentRow[]> {
    const rows: StoredDocument[] = after
      ? await manager.query(
          `SELECT ${DOCUMENT_COLUMNS} FROM brain.documents WHERE tenant_id = $1 AND (created_at, id) < ($3::timestamptz, $4::uuid)
           ORDER BY created_at DESC, id DESC LIMIT $2`,
          [tenantId, limit + 1, after.at, after.id],
        )
      : await manager.query(`SELECT ${DOCUMENT_COLUMNS} FROM brain.documents WHERE tenant_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2`, [tenantId, limit + 1]);
    const documents: DocumentRow[] = [];
    // One at a time: the statements share the transaction's connection.
    for (const row of rows) documents.push(await this.openDocument(manager, row));
    return documents;
  }

  /**
   * The tenant's collection statistics and the document frequencies of `termHashes` (the sizes
   * of a term's posting blocks count its merged chunks, the chunks waiting for a merge are counted
   * here), read in one statement (one snapshot). Once a load's merges are done no chunk waits: an
   * uncorrelated EXISTS, a plain index probe (which also skips, and marks, the entries merges left
   * dead), says so before any join. The only statement of its transaction (with RANKING_SETTINGS),
   * sent with the COMMIT (queryAndCommit): one round trip; the ranking has a transaction of its own.
   */
  async statistics(manager: EntityManager, tenantId: string, termHashes: readonly string[]): Promise<TenantIndexStatistics | null> {
    // The transaction's only statement: it goes with its COMMIT (one round trip; the ranking, if any, has its own).
    const rows = (await queryAndCommit(
      manager,
      `SELECT s.chunk_count, s.total_length, s.key_check, t.term_hash, t.df, t.waiting
       FROM brain.tenant_stats s
       LEFT JOIN (
         SELECT f.term_hash, sum(f.df)::int AS df, bool_or(f.waiting) AS waiting
         FROM (
           SELECT term_hash, sum(size) AS df, false AS waiting FROM brain.posting_blocks WHERE tenant_id = $1 AND term_hash = ANY($2::bigint[]) GROUP BY term_hash
           UNION ALL
           SELECT u.term_hash, count(*), true FROM brain.unmerged_chunks m
           JOIN brain.chunks c ON c.seq = m.chunk_seq AND c.tenant_id = $1
           CROSS JOIN LATERAL unnest(c.term_hashes) AS u(term_hash)
           WHERE m.tenant_id = $1 AND u.term_hash = ANY($2::bigint[])
             AND EXISTS (SELECT FROM brain.unmerged_chunks x WHERE x.tenant_id = $1)
           GROUP BY u.term_hash
         ) f
         GROUP BY f.term_hash
       ) t ON true
       WHERE s.tenant_id = $1`,
      [tenantId, termHashes],
    )) as Array<{ chunk_count: string; total_length: string; key_check: string; term_hash: string | null; df: number | null; waiting: boolean | null }>;
    const first = rows[0];
    if (!first) return null;
    const documentFrequencies = new Map<string, number>();
    for (const row of rows) if (row.term_hash !== null && row.df !== null) documentFrequencies.set(String(row.term_hash), row.df);
    const waiting = rows.some((row) => row.waiting === true);
    return { chunkCount: Number(first.chunk_count), totalLength: Number(first.total_length), keyCheck: String(first.key_check), documentFrequencies, waiting };
  }

  /**
   * The `limit` best chunks by BM25: Σ weight·tf / (tf + constant + perTerm·length) over the
   * query terms a chunk contains, best first (ties: the chunk indexed first), over the posting
   * blocks and, when `waiting` (see statistics), the chunks waiting for a merge. The database
   * hands over the query terms' blocks as stored; the sums per chunk are made here (scoreChunks),
   * and only the winners are read with their text. Each term's contribution is rounded to 1e-9
   * before summing: sums of such integral doubles are exact in any order, so a chunk's score
   * (and the order of near-ties) does not depend on the order postings arrive in.
   *
   * When a query mixes common and rarer words, the common words are first only looked up in the
   * term lists of the chunks holding a rarer one (planPruning); if that ranking cannot be proven
   * whole, the query is ranked in full. Either way the result is the same.
   *
   * Three statements (blocks, then winners or the pruned completion) in the caller's transaction:
   * a document deleted in between is left out of the ranking, never shown in part.
   */
  async rank(
    manager: EntityManager,
    tenantId: string,
    weights: ReadonlyArray<WeightedTerm>,
    normalisation: Normalisation,
    limit: number,
    waiting = true,
  ): Promise<RankedChunkRow[]> {
    // The bound holds while no chunk length can make the normalisation negative (k1 ≥ 0, 0 ≤ b ≤ 1).
    const plan = normalisation.constant >= 0 && normalisation.perTerm >= 0 ? planPruning(weights, limit, this.pruning) : undefined;
    let winners: Array<RankedRow & { score: number }> | undefined;
    if (plan) {
      const seqs: number[] = [];
      const parts: number[] = [];
      await this.withScores(manager, tenantId, plan.essential, normalisation, waiting, (candidates) =>
        candidates.forEach((seq, sum) => {
          seqs.push(seq);
          parts.push(sum);
        }),
      );
      const rows: Array<RankedRow & { score: number | string }> = await manager.query(PRUNED_RANKING, [
        tenantId,
        seqs,
        parts,
        normalisation.constant,
        normalisation.perTerm,
        limit,
        plan.rest.map((w) => w.termHash),
        plan.rest.map((w) => w.weight),
      ]);
      const scored = rows.map((row) => ({ ...row, score: Number(row.score) }));
      const exact = prunedRankingIsExact(
        scored.map((row) => row.score),
        limit,
        plan,
      );
      this.pruningOutcomes[exact ? 'pruned' : 'rankedInFull']++;
      if (exact) winners = scored;
    }
    // A winner whose document was deleted between the statements is missing from its text's:
    // ranked again once, so the answer still holds the `limit` best of what remains.
    for (let attempt = 1; !winners && attempt <= 2; attempt++) {
      const best = await this.withScores(manager, tenantId, weights, normalisation, waiting, (scores) => scores.top(limit));
      const rows: Array<RankedRow & { position: string }> = best.length === 0 ? [] : await manager.query(WINNERS, [tenantId, best.map((entry) => entry.seq)]);
      const found = rows.map((row) => ({ ...row, score: (best[Number(row.position) - 1]?.sum ?? NaN) / 1e9 }));
      if (rows.length === best.length || attempt === 2) winners = found;
    }
    // Only the winners are opened: one document's content once, however many of its chunks won.
    const documents = new Map<string, Promise<DocumentContent>>();
    const contentOf = (row: RankedRow): Promise<DocumentContent> => {
      let content = documents.get(row.documentId);
      if (!content) {
        content = row.sealed
          ? this.cipher.open<DocumentContent>(manager, { table: 'documents', id: row.documentId }, row.sealed)
          : Promise.resolve({ title: row.title ?? '', source: row.source, metadata: {} });
        documents.set(row.documentId, content);
      }
      return content;
    };
    const ranked: RankedChunkRow[] = [];
    // One at a time: a key not cached yet is read on the transaction's one connection.
    for (const row of winners ?? []) {
      const { title, source } = await contentOf(row);
      const text = isSealed(row.text) ? await this.cipher.open<string>(manager, { table: 'chunks', id: row.chunkId }, row.text) : row.text;
      ranked.push({ chunkId: row.chunkId, documentId: row.documentId, title, text, source, score: row.score });
    }
    return ranked;
  }

  /**
   * `use` applied to the score table of `terms` (scoreChunks), while the table's postings are
   * taken from the process's ranking budget; refused with a 400 when they pass one query's bound.
   */
  private async withScores<T>(
    manager: EntityManager,
    tenantId: string,
    terms: ReadonlyArray<WeightedTerm>,
    normalisation: Normalisation,
    waiting: boolean,
    use: (scores: ScoreTable) => T,
  ): Promise<T> {
    const postings = terms.reduce((sum, term) => sum + term.documentFrequency, 0);
    if (postings > this.maxRankedPostings) {
      throw new DomainError(
        ErrorCode.ValidationFailed,
        `The passages holding the query's words, counted once for each word, number ${postings}, more than the ${this.maxRankedPostings} one query may rank; use fewer or rarer words`,
        [{ field: 'q', message: 'too many passages hold these words' }],
      );
    }
    await this.rankingBudget.take(postings);
    try {
      return use(await this.scoreChunks(manager, tenantId, terms, normalisation, waiting, postings));
    } finally {
      this.rankingBudget.give(postings);
    }
  }

  /**
   * Every chunk holding one of `terms`, with the sum of their contributions (1e-9 units): the
   * terms' posting blocks as stored, one statement, summed here; and the chunks waiting for a
   * merge that hold one, when `waiting`. `postings`: their document frequencies' sum.
   */
  private async scoreChunks(
    manager: EntityManager,
    tenantId: string,
    terms: ReadonlyArray<WeightedTerm>,
    normalisation: Normalisation,
    waiting: boolean,
    postings: number,
  ): Promise<ScoreTable> {
    const weightOf = new Map(terms.map((term) => [term.termHash, term.weight]));
    const rows: Array<{ term: string; size: number | null; postings: string | null; seq: string | null; tf: number | null; length: number | null }> = await manager.query(
      waiting ? BLOCKS_AND_WAITING : BLOCKS,
      [tenantId, terms.map((term) => term.termHash), 'base64'],
    );
    // Sized for every posting of a different chunk (at most MAX_RANKED_POSTINGS): it never grows.
    const table = new ScoreTable(postings);
    // The sums run on the event loop: other requests get a turn every POSTINGS_PER_TURN postings.
    let sinceTurn = 0;
    for (const row of rows) {
      const weight = weightOf.get(row.term);
      if (weight === undefined) throw new Error(`The index answered for a term not asked about`);
      if (row.postings !== null) {
        table.addBlock(Buffer.from(row.postings, 'base64'), weight, normalisation);
        sinceTurn += row.size ?? 0;
      } else {
        table.add(Number(row.seq), contribution(weight, row.tf ?? 0, row.length ?? 0, normalisation));
        sinceTurn += 1;
      }
      if (sinceTurn >= POSTINGS_PER_TURN) {
        sinceTurn = 0;
        await setImmediate();
      }
    }
    return table;
  }

  private async openDocument(manager: EntityManager, row: StoredDocument): Promise<DocumentRow> {
    const { sealed, title, source, metadata, ...clear } = row;
    const content: DocumentContent = sealed
      ? await this.cipher.open<DocumentContent>(manager, { table: 'documents', id: row.id }, sealed)
      : { title: title ?? '', source, metadata: metadata ?? {} };
    return { ...clear, ...content };
  }

  /** What the tenant stores: its documents and the bytes of their content. */
  async usage(manager: EntityManager, tenantId: string): Promise<{ documents: number; bytes: number }> {
    const [row]: Array<{ documents: string; bytes: string }> = await manager.query(
      `SELECT document_count AS documents, content_bytes AS bytes FROM brain.tenant_stats WHERE tenant_id = $1`,
      [tenantId],
    );
    return { documents: Number(row?.documents ?? 0), bytes: Number(row?.bytes ?? 0) };
  }

  private async lockTenantStatistics(manager: EntityManager, tenantId: string): Promise<void> {
    await manager.query(`SELECT pg_advisory_xact_lock(hashtextextended('brain.statistics:' || $1::text, 0))`, [tenantId]);
  }

  /** Taken before the statistics lock wherever both are: merges and deletions of a tenant take turns. */
  private async lockTenantMerges(manager: EntityManager, tenantId: string): Promise<void> {
    await manager.query(`SELECT pg_advisory_xact_lock(${TENANT_MERGE_LOCK})`, [tenantId]);
  }
}

/** Refuses a document of `addedBytes` that the tenant, holding `used` before it, has no room for under `quota` (403 quota_exceeded). */
function assertWithinQuota(used: { readonly documents: number; readonly bytes: number }, addedBytes: number, quota: StorageQuota): void {
  if (used.documents + 1 > quota.documents) {
    throw new DomainError(
      ErrorCode.QuotaExceeded,
      `The tenant's storage quota allows ${quota.documents} documents, and it holds ${used.documents}; delete documents or ask for a larger quota`,
    );
  }
  if (used.bytes + addedBytes > quota.bytes) {
    throw new DomainError(
      ErrorCode.QuotaExceeded,
      `The tenant's storage quota allows ${quota.bytes} bytes of content, it holds ${used.bytes} and this document has ${addedBytes}; delete documents or ask for a larger quota`,
    );
  }
}

/** The segments of `encoded` in runs [from, to) as slices() cuts items: at most WRITE_BATCH_BLOCKS segments and WRITE_BATCH_BYTES bytes each (a larger segment alone). */
export function* writeRanges(encoded: Pick<EncodedSegments, 'count' | 'offsets'>): Generator<[number, number]> {
  let from = 0;
  for (let index = 0; index < encoded.count; index++) {
    const bytes = (encoded.offsets[index + 1] as number) - (encoded.offsets[from] as number);
    if (index > from && (index - from >= WRITE_BATCH_BLOCKS || bytes > WRITE_BATCH_BYTES)) {
      yield [from, index];
      from = index;
    }
  }
  if (from < encoded.count) yield [from, encoded.count];
}

/** `items` in consecutive slices of at most WRITE_BATCH_BLOCKS items and WRITE_BATCH_BYTES bytes (`bytesOf`; an item larger than that alone). */
function* slices<T>(items: readonly T[], bytesOf: (item: T) => number): Generator<T[]> {
  let slice: T[] = [];
  let bytes = 0;
  for (const item of items) {
    const size = bytesOf(item);
    if (slice.length > 0 && (slice.length >= WRITE_BATCH_BLOCKS || bytes + size > WRITE_BATCH_BYTES)) {
      yield slice;
      slice = [];
      bytes = 0;
    }
    slice.push(item);
    bytes += size;
  }
  if (slice.length > 0) yield slice;
}
