import { MigrationInterface, QueryRunner } from 'typeorm';

/** Columns no statement filters, joins or sorts by: ciphertext, coded postings, and the chunks' term lists. */
const OPAQUE_COLUMNS: ReadonlyArray<readonly [table: string, columns: readonly string[]]> = [
  ['brain.chunks', ['text', 'term_hashes', 'term_frequencies']],
  ['brain.posting_blocks', ['postings']],
  ['brain.documents', ['sealed']],
];

/**
 * ANALYZE collects no statistics of the columns in OPAQUE_COLUMNS (their statistics target is 0).
 * Their statistics inform no plan, and gathering them was most of ANALYZE's work on these tables:
 * the most common elements of every sampled chunk's hundred-odd term hashes, and 1.7 KB of
 * ciphertext per sampled chunk (about five times the rest, measured on 60,000 such rows). The
 * autoanalyze that follows a bulk load (PromptAutovacuum1766707200000) then ends sooner, and takes
 * less from the queries that run meanwhile.
 */
export class NoStatisticsOfOpaqueColumns1767139200000 implements MigrationInterface {
  name = 'NoStatisticsOfOpaqueColumns1767139200000';

  async up(queryRunner: QueryRunner): Promise<void> {
    for (const [table, columns] of OPAQUE_COLUMNS) {
      await queryRunner.query(`ALTER TABLE ${table} ${columns.map((column) => `ALTER COLUMN ${column} SET STATISTICS 0`).join(', ')}`);
    }
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    for (const [table, columns] of OPAQUE_COLUMNS) {
      await queryRunner.query(`ALTER TABLE ${table} ${columns.map((column) => `ALTER COLUMN ${column} SET STATISTICS -1`).join(', ')}`);
    }
  }
}
