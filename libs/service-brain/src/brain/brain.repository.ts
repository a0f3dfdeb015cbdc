import { EntityManager } from 'typeorm';
import { CursorPosition, DomainError, ErrorCode, isUuid, type PassageView, type StorageQuota } from '@mission/contracts';
import { isSealed, RecordCipher } from '@mission/persistence';
import { DEFAULT_PRUNING, planPruning, prunedRankingIsExact, type PruningOptions, type WeightedTerm } from '../ranking/pruning';

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

/** A chunk ready to be written: its distinct term hashes with their frequencies, and its length in terms. */
export interface IndexedChunk {
  readonly id: string;
  readonly ordinal: number;
  readonly text: string;
  readonly length: number;
  readonly termHashes: readonly string[];
  readonly termFrequencies: readonly number[];
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

/** One term's contribution as an integer of 1e-9 units: sums of them are exact in any order. */
const CONTRIBUTION = (weight: string, tf: string, length: string): string => `round(${weight} * ${tf} / (${tf} + $4::float8 + $5::float8 * ${length}) * 1e9::float8)`;

/**
 * The postings of the weighted terms `terms` (a relation of term_hash, weight): from the tenant's
 * posting blocks (one index range scan per term, a lateral join, so each posting meets its term's
 * weight without a hash probe; the arrays unnested side by side in the select list, which streams,
 * where unnest in FROM would first copy each block into a tuple store) and from its chunks not
 * merged into blocks yet when `waiting` (statistics found one holding a query term). Without them the
 * plan has no Append node, which costs per posting.
 */
const POSTINGS = (terms: string, waiting: boolean): string => `SELECT w.weight, p.chunk_seq, p.tf, p.length
         FROM ${terms} AS w(term_hash, weight)
         CROSS JOIN LATERAL (
           SELECT unnest(b.chunk_seqs) AS chunk_seq, unnest(b.frequencies) AS tf, unnest(b.lengths) AS length
           FROM brain.posting_blocks b
           WHERE b.tenant_id = $1 AND b.term_hash = w.term_hash
         ) p${waiting ? ` UNION ALL ${WAITING_POSTINGS(terms)}` : ''}`;

/** The postings of the chunks waiting for a merge. */
const WAITING_POSTINGS = (terms: string): string => `
         SELECT w.weight, c.seq, u.tf, c.length
         FROM brain.unmerged_chunks m
         JOIN brain.chunks c ON c.seq = m.chunk_seq AND c.tenant_id = $1
         CROSS JOIN LATERAL unnest(c.term_hashes, c.term_frequencies) AS u(term_hash, tf)
         JOIN ${terms} AS w(term_hash, weight) ON w.term_hash = u.term_hash
         WHERE m.tenant_id = $1`;

/** The winners joined to their text, document and score (the part both rankings share). */
const WINNERS = `SELECT c.id AS "chunkId", c.document_id AS "documentId", d.sealed, d.title, c.text, d.source, s.score
       FROM scored s
       CROSS JOIN LATERAL (SELECT id, document_id, text FROM brain.chunks WHERE seq = s.chunk_seq AND tenant_id = $1 OFFSET 0) c
       CROSS JOIN LATERAL (SELECT sealed, title, source FROM brain.documents WHERE id = c.document_id AND tenant_id = $1 OFFSET 0) d
       ORDER BY s.score DESC, s.chunk_seq`;

/** Every posting of every query term, aggregated per chunk ($2, $3: terms and weights). */
const FULL_RANKING = (waiting: boolean): string => `WITH scored AS (
         SELECT p.chunk_seq, sum(${CONTRIBUTION('p.weight', 'p.tf', 'p.length')}) / 1e9::float8 AS score
         FROM (${POSTINGS('unnest($2::bigint[], $3::float8[])', waiting)}) p
         GROUP BY p.chunk_seq
         ORDER BY score DESC, p.chunk_seq
         LIMIT $6
       )
       ${WINNERS}`;

/**
 * The candidates are the chunks holding an essential term ($2, $3), scored in full: the other
 * terms ($7, $8) are looked up in each candidate's own list of terms instead of read whole (see
 * planPruning; the caller checks that the result is exact).
 */
const PRUNED_RANKING = (waiting: boolean): string => `WITH essential AS (
         SELECT p.chunk_seq, sum(${CONTRIBUTION('p.weight', 'p.tf', 'p.length')}) AS part
         FROM (${POSTINGS('unnest($2::bigint[], $3::float8[])', waiting)}) p
         GROUP BY p.chunk_seq
       ), scored AS (
         SELECT e.chunk_seq, (e.part + coalesce((
             SELECT sum(${CONTRIBUTION('r.weight', 'c.term_frequencies[x.position]', 'c.length')})
             FROM unnest($7::bigint[], $8::float8[]) AS r(term_hash, weight)
             CROSS JOIN LATERAL (SELECT array_position(c.term_hashes, r.term_hash) AS position) x
             WHERE x.position IS NOT NULL
           ), 0)) / 1e9::float8 AS score
         FROM essential e
         JOIN brain.chunks c ON c.seq = e.chunk_seq AND c.tenant_id = $1
         ORDER BY score DESC, e.chunk_seq
         LIMIT $6
       )
       ${WINNERS}`;

const [FULL_RANKING_MERGED, FULL_RANKING_WAITING, PRUNED_RANKING_MERGED, PRUNED_RANKING_WAITING] = [
  FULL_RANKING(false),
  FULL_RANKING(true),
  PRUNED_RANKING(false),
  PRUNED_RANKING(true),
];

type RankedRow = Omit<RankedChunkRow, 'title' | 'source'> & { score: number | string; sealed: string | null; title: string | null; source: string | null };

const CHUNK_BATCH = 1_000;

/** Chunks merged into posting blocks by one merge at most: bounds a block's arrays and a merge's transaction. */
export const MERGE_BATCH_CHUNKS = 4_096;

/**
 * For the rest of the transaction: no sequential scans where an index serves. Every access here is
 * by tenant and key; straight after a bulk load, before autovacuum's ANALYZE, the planner takes the
 * index tables for nearly empty and would otherwise scan a whole table once per term (seen: a
 * merge's append of a few thousand terms ran for minutes, a nested loop over sequential scans).
 */
const INDEX_ACCESS_ONLY = `set_config('enable_seqscan', 'off', true)`;

/** The tenant's ($1) merge lock: a merge tries it, a deletion waits for it, so the two take turns. */
const TENANT_MERGE_LOCK = `hashtextextended('brain.merge:' || $1::text, 0)`;

/** Merges of at most this many chunks append to small blocks; larger ones only make new blocks. */
const APPEND_BATCH_CHUNKS = 256;

/** A term's newest block takes the postings of later merges while it holds at most this many (an append rewrites it: ≤ 2 KiB of arrays). */
const SMALL_BLOCK = 128;

const DOCUMENT_COLUMNS = `id, tenant_id AS "tenantId", sealed, title, source, metadata, content_bytes AS "contentBytes", chunk_count AS "chunkCount", created_at AS "createdAt"`;

/** What the tenant wrote about a document: stored only as ciphertext (`documents.sealed`). */
type DocumentContent = Pick<DocumentRow, 'title' | 'source' | 'metadata'>;
type StoredDocument = Omit<DocumentRow, keyof DocumentContent> & { sealed: string | null; title: string | null; source: string | null; metadata: Record<string, string> | null };

/**
 * The only code that touches the brain schema. Every statement is filtered by tenant. Writers of
 * a tenant's totals take a per-tenant transaction lock first, and merges and deletions (the
 * writers of posting blocks and document frequencies) another, so concurrent ingestions, merges
 * and deletions of one tenant never deadlock on those rows, and once the merges are done the
 * statistics and the blocks always equal what the chunks hold.
 */
export class BrainRepository {
  /** Seals document content and chunk texts on the way in, opens them on the way out: the database holds neither in clear. */
  /** How rankings went since start: pruned (the long posting lists skipped), or ranked in full after a pruned try. */
  readonly pruningOutcomes = { pruned: 0, rankedInFull: 0 };

  constructor(
    private readonly cipher: RecordCipher,
    private readonly pruning: PruningOptions = DEFAULT_PRUNING,
  ) {}

  /**
   * Stores a document with its passages, their terms, and a place in unmerged_chunks (a merge
   * later writes them into posting blocks: mergeUnmerged), and adds them to the tenant's totals.
   * With a quota, refuses (QuotaExceeded, the transaction rolls back) when the tenant
   * would hold more documents or bytes than it allows: checked under the tenant's statistics lock,
   * so concurrent ingestions cannot pass it together.
   */
  async insertDocument(manager: EntityManager, document: DocumentRow, chunks: readonly IndexedChunk[], keyCheck: string, quota?: StorageQuota): Promise<void> {
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
    for (const chunk of chunks) {
      if (chunk.termFrequencies.length !== chunk.termHashes.length)
        throw new Error(`Chunk ${chunk.ordinal} has ${chunk.termHashes.length} terms and ${chunk.termFrequencies.length} frequencies`);
    }
    for (let start = 0; start < chunks.length; start += CHUNK_BATCH) {
      const batch = chunks.slice(start, start + CHUNK_BATCH);
      const params: unknown[] = [document.tenantId, document.id];
      const texts = await this.cipher.sealAll(
        manager,
        batch.map((chunk) => ({ record: { table: 'chunks', id: chunk.id }, value: chunk.text })),
      );
      const rows = batch.map((chunk, index) => {
        params.push(chunk.id, chunk.ordinal, texts[index], chunk.length, integerArrayLiteral(chunk.termHashes), integerArrayLiteral(chunk.termFrequencies));
        const at = params.length - 6;
        return `($${at + 1}::uuid, $1::uuid, $2::uuid, $${at + 2}::int, $${at + 3}::text, $${at + 4}::int, $${at + 5}::bigint[], $${at + 6}::int[])`;
      });
      await manager.query(
        `WITH stored AS (
           INSERT INTO brain.chunks (id, tenant_id, document_id, ordinal, text, length, term_hashes, term_frequencies) VALUES ${rows.join(', ')} RETURNING seq
         )
         INSERT INTO brain.unmerged_chunks (tenant_id, chunk_seq) SELECT $1::uuid, seq FROM stored`,
        params,
      );
    }

    await this.lockTenantStatistics(manager, document.tenantId);
    if (quota) await this.assertWithinQuota(manager, document.tenantId, document.contentBytes, quota);
    const totalLength = chunks.reduce((sum, chunk) => sum + chunk.length, 0);
    const updated: unknown[] = await manager.query(
      `INSERT INTO brain.tenant_stats (tenant_id, document_count, chunk_count, total_length, content_bytes, key_check, updated_at)
       VALUES ($1, 1, $2, $3, $5, $4, clock_timestamp())
       ON CONFLICT (tenant_id) DO UPDATE SET
         document_count = brain.tenant_stats.document_count + 1,
         chunk_count = brain.tenant_stats.chunk_count + EXCLUDED.chunk_count,
         total_length = brain.tenant_stats.total_length + EXCLUDED.total_length,
         content_bytes = brain.tenant_stats.content_bytes + EXCLUDED.content_bytes,
         updated_at = EXCLUDED.updated_at
       WHERE brain.tenant_stats.key_check = EXCLUDED.key_check
       RETURNING 1`,
      [document.tenantId, chunks.length, totalLength, keyCheck, document.contentBytes],
    );
    if (updated.length !== 1) throw new IndexKeyMismatchError(document.tenantId);
  }

  /**
   * Deletes a document with its chunks and index entries, and takes them out of the statistics.
   * False when there is no such document. Its chunks still waiting for a merge just leave
   * unmerged_chunks; the merged ones leave the posting blocks that hold them (a block left empty
   * goes) and the document frequencies. Takes the tenant's merge lock first, so no merge runs
   * meanwhile.
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
      const blocks = `b.tenant_id = $1 AND b.term_hash IN (SELECT term_hash FROM terms) AND b.block <= $4 AND b.last_seq >= $3 AND b.chunk_seqs && $2::bigint[]`;
      const parameters = [tenantId, merged, chunks?.first, chunks?.last];
      await manager.query(`WITH terms AS (${terms}) DELETE FROM brain.posting_blocks b WHERE ${blocks} AND b.chunk_seqs <@ $2::bigint[]`, parameters);
      await manager.query(
        `WITH terms AS (${terms}), kept AS (
           SELECT b.term_hash, b.block, array_agg(u.chunk_seq ORDER BY u.position) AS chunk_seqs, array_agg(u.tf ORDER BY u.position) AS frequencies,
                  array_agg(u.length ORDER BY u.position) AS lengths
           FROM brain.posting_blocks b
           CROSS JOIN LATERAL unnest(b.chunk_seqs, b.frequencies, b.lengths) WITH ORDINALITY AS u(chunk_seq, tf, length, position)
           WHERE ${blocks} AND u.chunk_seq <> ALL($2::bigint[])
           GROUP BY b.term_hash, b.block
         )
         UPDATE brain.posting_blocks b SET chunk_seqs = kept.chunk_seqs, frequencies = kept.frequencies, lengths = kept.lengths
         FROM kept WHERE b.tenant_id = $1 AND b.term_hash = kept.term_hash AND b.block = kept.block`,
        parameters,
      );
      await this.lockTenantStatistics(manager, tenantId);
      await manager.query(`WITH terms AS (${terms}) DELETE FROM brain.term_stats s USING terms g WHERE s.tenant_id = $1 AND s.term_hash = g.term_hash AND s.df <= g.n`, [
        tenantId,
        merged,
      ]);
      await manager.query(`WITH terms AS (${terms}) UPDATE brain.term_stats s SET df = s.df - g.n FROM terms g WHERE s.tenant_id = $1 AND s.term_hash = g.term_hash`, [
        tenantId,
        merged,
      ]);
    } else {
      await this.lockTenantStatistics(manager, tenantId);
    }
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
   * Writes up to `maxChunks` of the tenant's chunks waiting in unmerged_chunks (the oldest first)
   * into posting blocks and adds their document frequencies to term_stats, in the caller's
   * transaction, under the tenant's merge lock (so merges and deletions of one tenant take
   * turns; ingestion does not wait for them). A term's postings go into a new block, or, in a
   * merge of a few chunks (APPEND_BATCH_CHUNKS), are appended to the term's newest block while that
   * stays within SMALL_BLOCK postings: documents merged one at a time (a trickle of small ones)
   * then fill blocks of up to that many instead of leaving one tiny block per document. Returns
   * the chunks merged, or null when another merge of the tenant holds the lock (it will take these
   * chunks, or the caller tries again later).
   */
  async mergeUnmerged(manager: EntityManager, tenantId: string, maxChunks: number = MERGE_BATCH_CHUNKS): Promise<number | null> {
    const [lock]: Array<{ locked: boolean }> = await manager.query(
      `SELECT pg_try_advisory_xact_lock(${TENANT_MERGE_LOCK}) AS locked, ${INDEX_ACCESS_ONLY},
         set_config('work_mem', '32MB', true), set_config('statement_timeout', '120s', true)`,
      [tenantId],
    );
    if (!lock?.locked) return null;
    // The batch's postings per term go through a temporary table with fresh statistics: planned
    // from estimates instead (tens of thousands of terms taken for ten), the append below became
    // a nested loop over them per block and ran for minutes.
    await manager.query(
      `CREATE TEMPORARY TABLE brain_merge (term_hash bigint PRIMARY KEY, first_seq bigint NOT NULL, last_seq bigint NOT NULL, chunk_seqs bigint[] NOT NULL,
         frequencies integer[] NOT NULL, lengths integer[] NOT NULL, into_block bigint) ON COMMIT DROP`,
    );
    const [merged]: Array<{ chunks: string }> = await manager.query(
      `WITH batch AS (
         DELETE FROM brain.unmerged_chunks
         WHERE tenant_id = $1 AND chunk_seq IN (SELECT chunk_seq FROM brain.unmerged_chunks WHERE tenant_id = $1 ORDER BY chunk_seq LIMIT $2)
         RETURNING chunk_seq
       ), postings AS (
         SELECT u.term_hash, c.seq, u.tf, c.length
         FROM batch JOIN brain.chunks c ON c.seq = batch.chunk_seq AND c.tenant_id = $1
         CROSS JOIN LATERAL unnest(c.term_hashes, c.term_frequencies) AS u(term_hash, tf)
       ), terms AS (
         INSERT INTO pg_temp.brain_merge (term_hash, first_seq, last_seq, chunk_seqs, frequencies, lengths)
         SELECT term_hash, min(seq), max(seq), array_agg(seq ORDER BY seq), array_agg(tf ORDER BY seq), array_agg(length ORDER BY seq)
         FROM postings GROUP BY term_hash
         RETURNING 1
       )
       SELECT (SELECT count(*) FROM batch) AS chunks, (SELECT count(*) FROM terms) AS terms`,
      [tenantId, maxChunks],
    );
    const chunks = Number(merged?.chunks ?? 0);
    if (chunks === 0) return 0;
    await manager.query(`ANALYZE pg_temp.brain_merge`);
    // A small batch (documents arriving one at a time): each term's newest block takes the batch's
    // postings of the term when it has room. A large batch (a bulk load) makes blocks of its own:
    // appending would rewrite a small block for nearly every rare word of the batch.
    if (chunks <= APPEND_BATCH_CHUNKS) {
      await manager.query(
        `UPDATE pg_temp.brain_merge m SET into_block = (
         SELECT CASE WHEN cardinality(b.chunk_seqs) + cardinality(m.chunk_seqs) <= $2 THEN b.block END
         FROM brain.posting_blocks b WHERE b.tenant_id = $1 AND b.term_hash = m.term_hash ORDER BY b.block DESC LIMIT 1
       )`,
        [tenantId, SMALL_BLOCK],
      );
      await manager.query(
        `UPDATE brain.posting_blocks b
         SET block = least(b.block, m.first_seq), last_seq = greatest(b.last_seq, m.last_seq), chunk_seqs = b.chunk_seqs || m.chunk_seqs,
             frequencies = b.frequencies || m.frequencies, lengths = b.lengths || m.lengths
         FROM pg_temp.brain_merge m
         WHERE m.into_block IS NOT NULL AND b.tenant_id = $1 AND b.term_hash = m.term_hash AND b.block = m.into_block`,
        [tenantId],
      );
    }
    await manager.query(
      `INSERT INTO brain.posting_blocks (tenant_id, term_hash, block, last_seq, chunk_seqs, frequencies, lengths)
       SELECT $1::uuid, term_hash, first_seq, last_seq, chunk_seqs, frequencies, lengths FROM pg_temp.brain_merge WHERE into_block IS NULL`,
      [tenantId],
    );
    await manager.query(
      `INSERT INTO brain.term_stats (tenant_id, term_hash, df)
       SELECT $1::uuid, term_hash, cardinality(chunk_seqs) FROM pg_temp.brain_merge
       ON CONFLICT (tenant_id, term_hash) DO UPDATE SET df = brain.term_stats.df + EXCLUDED.df`,
      [tenantId],
    );
    return chunks;
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
   * The tenant's collection statistics and the document frequencies of `termHashes` (term_stats
   * counts the merged chunks, the chunks waiting for a merge are counted here), read in one
   * statement (one snapshot). Usually no chunk waits: an uncorrelated EXISTS, a plain index probe
   * (which also skips, and marks, the entries merges left dead), says so before any join. Also sets up the transaction for the scoring query: no JIT
   * compilation (cheap per row, but it can look expensive to the planner, and compiling would cost
   * more than running it), no memoizing of the per-term scans (each term is scanned once; caching
   * its postings only costs), and memory enough to aggregate tens of thousands of postings per
   * chunk without spilling to disk, and index access only (INDEX_ACCESS_ONLY).
   */
  async statistics(manager: EntityManager, tenantId: string, termHashes: readonly string[]): Promise<TenantIndexStatistics | null> {
    const rows: Array<{ chunk_count: string; total_length: string; key_check: string; term_hash: string | null; df: number | null; waiting: boolean | null }> = await manager.query(
      `SELECT s.chunk_count, s.total_length, s.key_check, t.term_hash, t.df, t.waiting, set_config('jit', 'off', true), set_config('enable_memoize', 'off', true),
         set_config('work_mem', '32MB', true), ${INDEX_ACCESS_ONLY}
       FROM brain.tenant_stats s
       LEFT JOIN (
         SELECT f.term_hash, sum(f.df)::int AS df, bool_or(f.waiting) AS waiting
         FROM (
           SELECT term_hash, df, false AS waiting FROM brain.term_stats WHERE tenant_id = $1 AND term_hash = ANY($2::bigint[])
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
    );
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
   * blocks and, when `waiting` (see statistics), the chunks waiting for a merge (POSTINGS),
   * aggregated per chunk; only the winners are joined to their text. Each term's
   * contribution is rounded to 1e-9 before summing: sums of such integral doubles are exact in
   * any order, so a chunk's score (and the order of near-ties) does not depend on the plan the
   * database picks for a given limit.
   *
   * When a query mixes common and rarer words, the common words are first only looked up in the
   * term lists of the chunks holding a rarer one (planPruning); if that ranking cannot be proven whole, the
   * query is ranked in full. Either way the result is the same.
   */
  async rank(
    manager: EntityManager,
    tenantId: string,
    weights: ReadonlyArray<WeightedTerm>,
    normalisation: { readonly constant: number; readonly perTerm: number },
    limit: number,
    waiting = true,
  ): Promise<RankedChunkRow[]> {
    // The bound holds while no chunk length can make the normalisation negative (k1 ≥ 0, 0 ≤ b ≤ 1).
    const plan = normalisation.constant >= 0 && normalisation.perTerm >= 0 ? planPruning(weights, limit, this.pruning) : undefined;
    let rows: RankedRow[] | undefined;
    if (plan) {
      rows = await manager.query(waiting ? PRUNED_RANKING_WAITING : PRUNED_RANKING_MERGED, [
        tenantId,
        plan.essential.map((w) => w.termHash),
        plan.essential.map((w) => w.weight),
        normalisation.constant,
        normalisation.perTerm,
        limit,
        plan.rest.map((w) => w.termHash),
        plan.rest.map((w) => w.weight),
      ]);
      const exact = prunedRankingIsExact(
        (rows ?? []).map((row) => Number(row.score)),
        limit,
        plan,
      );
      this.pruningOutcomes[exact ? 'pruned' : 'rankedInFull']++;
      if (!exact) rows = undefined;
    }
    rows ??= await manager.query(waiting ? FULL_RANKING_WAITING : FULL_RANKING_MERGED, [
      tenantId,
      weights.map((w) => w.termHash),
      weights.map((w) => w.weight),
      normalisation.constant,
      normalisation.perTerm,
      limit,
    ]);
    const winners = rows as RankedRow[];
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
    for (const row of winners) {
      const { title, source } = await contentOf(row);
      const text = isSealed(row.text) ? await this.cipher.open<string>(manager, { table: 'chunks', id: row.chunkId }, row.text) : row.text;
      ranked.push({ chunkId: row.chunkId, documentId: row.documentId, title, text, source, score: Number(row.score) });
    }
    return ranked;
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

  private async assertWithinQuota(manager: EntityManager, tenantId: string, addedBytes: number, quota: StorageQuota): Promise<void> {
    const used = await this.usage(manager, tenantId);
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

  private async lockTenantStatistics(manager: EntityManager, tenantId: string): Promise<void> {
    await manager.query(`SELECT pg_advisory_xact_lock(hashtextextended('brain.statistics:' || $1::text, 0))`, [tenantId]);
  }

  /** Taken before the statistics lock wherever both are: merges and deletions of a tenant take turns. */
  private async lockTenantMerges(manager: EntityManager, tenantId: string): Promise<void> {
    await manager.query(`SELECT pg_advisory_xact_lock(${TENANT_MERGE_LOCK}), ${INDEX_ACCESS_ONLY}`, [tenantId]);
  }
}
