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
const CONTRIBUTION = (alias: string, weight: string): string => `round(${weight} * ${alias}.tf / (${alias}.tf + $4::float8 + $5::float8 * ${alias}.length) * 1e9::float8)`;

/** The winners joined to their text, document and score (the part both rankings share). */
const WINNERS = `SELECT c.id AS "chunkId", c.document_id AS "documentId", d.sealed, d.title, c.text, d.source, s.score
       FROM scored s
       JOIN brain.chunks c ON c.seq = s.chunk_seq AND c.tenant_id = $1
       JOIN brain.documents d ON d.id = c.document_id AND d.tenant_id = $1
       ORDER BY s.score DESC, s.chunk_seq`;

/** Every posting of every query term, aggregated per chunk ($2, $3: terms and weights). */
const FULL_RANKING = `WITH scored AS (
         SELECT p.chunk_seq, sum(${CONTRIBUTION('p', 'w.weight')}) / 1e9::float8 AS score
         FROM unnest($2::bigint[], $3::float8[]) AS w(term_hash, weight)
         CROSS JOIN LATERAL (
           SELECT chunk_seq, tf, length FROM brain.postings WHERE tenant_id = $1 AND term_hash = w.term_hash
         ) p
         GROUP BY p.chunk_seq
         ORDER BY score DESC, p.chunk_seq
         LIMIT $6
       )
       ${WINNERS}`;

/**
 * The candidates are the chunks holding an essential term ($2, $3), scored in full: the other
 * terms ($7, $8) are looked up for each candidate by primary key instead of read whole (see
 * planPruning; the caller checks that the result is exact).
 */
const PRUNED_RANKING = `WITH essential AS (
         SELECT p.chunk_seq, sum(${CONTRIBUTION('p', 'w.weight')}) AS part
         FROM unnest($2::bigint[], $3::float8[]) AS w(term_hash, weight)
         CROSS JOIN LATERAL (
           SELECT chunk_seq, tf, length FROM brain.postings WHERE tenant_id = $1 AND term_hash = w.term_hash
         ) p
         GROUP BY p.chunk_seq
       ), scored AS (
         SELECT e.chunk_seq, (e.part + coalesce((
             SELECT sum(${CONTRIBUTION('p', 'r.weight')})
             FROM unnest($7::bigint[], $8::float8[]) AS r(term_hash, weight)
             JOIN brain.postings p ON p.tenant_id = $1 AND p.term_hash = r.term_hash AND p.chunk_seq = e.chunk_seq
           ), 0)) / 1e9::float8 AS score
         FROM essential e
         ORDER BY score DESC, e.chunk_seq
         LIMIT $6
       )
       ${WINNERS}`;

type RankedRow = Omit<RankedChunkRow, 'title' | 'source'> & { score: number | string; sealed: string | null; title: string | null; source: string | null };

const CHUNK_BATCH = 1_000;
const POSTING_BATCH = 50_000;

const DOCUMENT_COLUMNS = `id, tenant_id AS "tenantId", sealed, title, source, metadata, content_bytes AS "contentBytes", chunk_count AS "chunkCount", created_at AS "createdAt"`;

/** What the tenant wrote about a document: stored only as ciphertext (`documents.sealed`). */
type DocumentContent = Pick<DocumentRow, 'title' | 'source' | 'metadata'>;
type StoredDocument = Omit<DocumentRow, keyof DocumentContent> & { sealed: string | null; title: string | null; source: string | null; metadata: Record<string, string> | null };

/**
 * The only code that touches the brain schema. Every statement is filtered by tenant. Writers of
 * a tenant's statistics (term document frequencies and the tenant totals) take a per-tenant
 * transaction lock first, so concurrent ingestions and deletions of one tenant never deadlock on
 * those rows, and the statistics always equal what the postings hold.
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
   * Stores a document with its passages and index entries, and adds them to the tenant's
   * statistics. With a quota, refuses (QuotaExceeded, the transaction rolls back) when the tenant
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
    const seqByOrdinal = new Map<number, string>();
    for (let start = 0; start < chunks.length; start += CHUNK_BATCH) {
      const batch = chunks.slice(start, start + CHUNK_BATCH);
      const params: unknown[] = [document.tenantId, document.id];
      const texts = await this.cipher.sealAll(
        manager,
        batch.map((chunk) => ({ record: { table: 'chunks', id: chunk.id }, value: chunk.text })),
      );
      const rows = batch.map((chunk, index) => {
        params.push(chunk.id, chunk.ordinal, texts[index], chunk.length, integerArrayLiteral(chunk.termHashes));
        const at = params.length - 5;
        return `($${at + 1}::uuid, $1::uuid, $2::uuid, $${at + 2}::int, $${at + 3}::text, $${at + 4}::int, $${at + 5}::bigint[])`;
      });
      const inserted: Array<{ seq: string; ordinal: number }> = await manager.query(
        `INSERT INTO brain.chunks (id, tenant_id, document_id, ordinal, text, length, term_hashes) VALUES ${rows.join(', ')} RETURNING seq, ordinal`,
        params,
      );
      for (const row of inserted) seqByOrdinal.set(row.ordinal, String(row.seq));
    }

    let terms: string[] = [];
    let seqs: string[] = [];
    let frequencies: number[] = [];
    let lengths: number[] = [];
    const documentFrequencies = new Map<string, number>();
    const flush = async (): Promise<void> => {
      if (terms.length === 0) return;
      await manager.query(
        `INSERT INTO brain.postings (tenant_id, term_hash, chunk_seq, tf, length)
         SELECT $1::uuid, t, s, f, l FROM unnest($2::bigint[], $3::bigint[], $4::int[], $5::int[]) AS p(t, s, f, l)`,
        [document.tenantId, integerArrayLiteral(terms), integerArrayLiteral(seqs), integerArrayLiteral(frequencies), integerArrayLiteral(lengths)],
      );
      terms = [];
      seqs = [];
      frequencies = [];
      lengths = [];
    };
    for (const chunk of chunks) {
      const seq = seqByOrdinal.get(chunk.ordinal);
      if (seq === undefined) throw new Error(`Chunk ${chunk.ordinal} was not stored`);
      chunk.termHashes.forEach((hash, index) => {
        terms.push(hash);
        seqs.push(seq);
        frequencies.push(chunk.termFrequencies[index] ?? 1);
        lengths.push(chunk.length);
        documentFrequencies.set(hash, (documentFrequencies.get(hash) ?? 0) + 1);
      });
      if (terms.length >= POSTING_BATCH) await flush();
    }
    await flush();

    await this.lockTenantStatistics(manager, document.tenantId);
    if (quota) await this.assertWithinQuota(manager, document.tenantId, document.contentBytes, quota);
    const hashes = [...documentFrequencies.keys()];
    await manager.query(
      `INSERT INTO brain.term_stats (tenant_id, term_hash, df)
       SELECT $1::uuid, t, d FROM unnest($2::bigint[], $3::int[]) AS s(t, d)
       ON CONFLICT (tenant_id, term_hash) DO UPDATE SET df = brain.term_stats.df + EXCLUDED.df`,
      [document.tenantId, integerArrayLiteral(hashes), integerArrayLiteral(hashes.map((hash) => documentFrequencies.get(hash) ?? 0))],
    );
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

  /** Deletes a document with its chunks and postings, and takes them out of the statistics. False when there is no such document. */
  async deleteDocument(manager: EntityManager, tenantId: string, id: string): Promise<boolean> {
    if (!isUuid(id)) return false;
    const found: Array<{ content_bytes: number }> = await manager.query(`SELECT content_bytes FROM brain.documents WHERE tenant_id = $1 AND id = $2 FOR UPDATE`, [tenantId, id]);
    if (found.length === 0) return false;
    const chunksOfDocument = `SELECT seq, unnest(term_hashes) AS term_hash FROM brain.chunks WHERE tenant_id = $1 AND document_id = $2`;
    await manager.query(
      `DELETE FROM brain.postings p USING (${chunksOfDocument}) g
       WHERE p.tenant_id = $1 AND p.term_hash = g.term_hash AND p.chunk_seq = g.seq`,
      [tenantId, id],
    );
    const [totals]: Array<{ chunks: string; length: string }> = await manager.query(
      `SELECT count(*) AS chunks, coalesce(sum(length), 0) AS length FROM brain.chunks WHERE tenant_id = $1 AND document_id = $2`,
      [tenantId, id],
    );

    await this.lockTenantStatistics(manager, tenantId);
    const frequencies = `SELECT term_hash, count(*)::int AS n FROM (${chunksOfDocument}) t GROUP BY term_hash`;
    await manager.query(`DELETE FROM brain.term_stats s USING (${frequencies}) g WHERE s.tenant_id = $1 AND s.term_hash = g.term_hash AND s.df <= g.n`, [tenantId, id]);
    await manager.query(`UPDATE brain.term_stats s SET df = s.df - g.n FROM (${frequencies}) g WHERE s.tenant_id = $1 AND s.term_hash = g.term_hash`, [tenantId, id]);
    await manager.query(`DELETE FROM brain.documents WHERE tenant_id = $1 AND id = $2`, [tenantId, id]);
    await manager.query(
      `UPDATE brain.tenant_stats SET document_count = document_count - 1, chunk_count = chunk_count - $2, total_length = total_length - $3,
         content_bytes = greatest(content_bytes - $4, 0), updated_at = clock_timestamp()
       WHERE tenant_id = $1`,
      [tenantId, Number(totals?.chunks ?? 0), Number(totals?.length ?? 0), Number(found[0]?.content_bytes ?? 0)],
    );
    return true;
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
   * The tenant's collection statistics and the document frequencies of `termHashes`, read in one
   * statement (one snapshot). Also sets up the transaction for the scoring query: no JIT
   * compilation (cheap per row, but it can look expensive to the planner, and compiling would cost
   * more than running it), no memoizing of the per-term scans (each term is scanned once; caching
   * its postings only costs), and memory enough to aggregate tens of thousands of postings per
   * chunk without spilling to disk.
   */
  async statistics(manager: EntityManager, tenantId: string, termHashes: readonly string[]): Promise<TenantIndexStatistics | null> {
    const rows: Array<{ chunk_count: string; total_length: string; key_check: string; term_hash: string | null; df: number | null }> = await manager.query(
      `SELECT s.chunk_count, s.total_length, s.key_check, t.term_hash, t.df, set_config('jit', 'off', true), set_config('enable_memoize', 'off', true),
         set_config('work_mem', '32MB', true)
       FROM brain.tenant_stats s
       LEFT JOIN brain.term_stats t ON t.tenant_id = s.tenant_id AND t.term_hash = ANY($2::bigint[])
       WHERE s.tenant_id = $1`,
      [tenantId, termHashes],
    );
    const first = rows[0];
    if (!first) return null;
    const documentFrequencies = new Map<string, number>();
    for (const row of rows) if (row.term_hash !== null && row.df !== null) documentFrequencies.set(String(row.term_hash), row.df);
    return { chunkCount: Number(first.chunk_count), totalLength: Number(first.total_length), keyCheck: String(first.key_check), documentFrequencies };
  }

  /**
   * The `limit` best chunks by BM25: Σ weight·tf / (tf + constant + perTerm·length) over the
   * query terms a chunk contains, best first (ties: the chunk indexed first). One index-only
   * range scan per term (a lateral join, so each posting meets its term's weight without a hash
   * probe), aggregated per chunk; only the winners are joined to their text. Each term's
   * contribution is rounded to 1e-9 before summing: sums of such integral doubles are exact in
   * any order, so a chunk's score (and the order of near-ties) does not depend on the plan the
   * database picks for a given limit.
   *
   * When a query mixes common and rarer words, the common words' long lists are first only probed
   * for the chunks holding a rarer one (planPruning); if that ranking cannot be proven whole, the
   * query is ranked in full. Either way the result is the same.
   */
  async rank(
    manager: EntityManager,
    tenantId: string,
    weights: ReadonlyArray<WeightedTerm>,
    normalisation: { readonly constant: number; readonly perTerm: number },
    limit: number,
  ): Promise<RankedChunkRow[]> {
    // The bound holds while no chunk length can make the normalisation negative (k1 ≥ 0, 0 ≤ b ≤ 1).
    const plan = normalisation.constant >= 0 && normalisation.perTerm >= 0 ? planPruning(weights, limit, this.pruning) : undefined;
    let rows: RankedRow[] | undefined;
    if (plan) {
      rows = await manager.query(PRUNED_RANKING, [
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
    rows ??= await manager.query(FULL_RANKING, [tenantId, weights.map((w) => w.termHash), weights.map((w) => w.weight), normalisation.constant, normalisation.perTerm, limit]);
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
}
