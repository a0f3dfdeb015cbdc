import { MigrationInterface, QueryRunner } from 'typeorm';
import { withShortLockWaits } from './1767139200000-opaque-columns';

/**
 * The statistics target of the Brain's key columns, where ANALYZE still collects statistics (the
 * opaque columns have none: OpaqueColumns1767139200000).
 */
export const KEY_COLUMN_STATISTICS_TARGET = 10;

/** The columns of the index tables that statements select, join or sort by. */
export const KEY_COLUMNS: ReadonlyArray<readonly [table: string, columns: readonly string[]]> = [
  ['brain.chunks', ['seq', 'id', 'tenant_id', 'document_id', 'ordinal', 'length']],
  ['brain.posting_blocks', ['tenant_id', 'term_hash', 'block', 'last_seq', 'size']],
  ['brain.unmerged_chunks', ['tenant_id', 'chunk_seq']],
];

/**
 * ANALYZE reads a sample of 300 times a table's largest statistics target in rows: 30,000 at
 * PostgreSQL's default of 100, so the autoanalyze that keeps up with a bulk load
 * (PromptAutovacuum1766707200000) read most of the chunks' pages each time, four or five times
 * per load of 100,000 chunks (2.7–3.6 s of analysis of `chunks` and 1.2–2.0 s of `posting_blocks`
 * per load, autovacuum's cost delay included: bench/README.md). Every statement of the Brain
 * reaches these tables by a key (a primary key, a tenant's document, a tenant's terms, a tenant's
 * waiting chunks), where a plan needs row counts and rough distinct counts, which a sample of
 * 3,000 rows gives: a target of 10 (ten most common values, ten histogram buckets). Reads and
 * writes go on meanwhile: the change takes each table's SHARE UPDATE EXCLUSIVE lock, which VACUUM,
 * ANALYZE, index builds and a few other ALTER TABLE forms take too, waiting for it a little at a
 * time (withShortLockWaits: a manual VACUUM or an anti-wraparound autovacuum, which does not give
 * way, delays it without queueing another VACUUM behind it for longer than a try). It applies from
 * the next ANALYZE.
 */
export class KeyColumnStatistics1767225600000 implements MigrationInterface {
  name = 'KeyColumnStatistics1767225600000';

  async up(queryRunner: QueryRunner): Promise<void> {
    for (const [table, columns] of KEY_COLUMNS) {
      await withShortLockWaits(queryRunner, `ALTER TABLE ${table} ${columns.map((column) => `ALTER COLUMN ${column} SET STATISTICS ${KEY_COLUMN_STATISTICS_TARGET}`).join(', ')}`);
    }
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    for (const [table, columns] of KEY_COLUMNS) {
      await withShortLockWaits(queryRunner, `ALTER TABLE ${table} ${columns.map((column) => `ALTER COLUMN ${column} SET STATISTICS -1`).join(', ')}`);
    }
  }
}
