import { setTimeout as sleep } from 'node:timers/promises';
import { MigrationInterface, QueryRunner } from 'typeorm';
import { sqlStateOf } from '@mission/persistence';

/** Columns no statement filters, joins or sorts by: ciphertext, coded postings, and the chunks' term lists. */
const OPAQUE_COLUMNS: ReadonlyArray<readonly [table: string, columns: readonly string[]]> = [
  ['brain.chunks', ['text', 'term_hashes', 'term_frequencies']],
  ['brain.posting_blocks', ['postings']],
  ['brain.documents', ['sealed']],
];

/** Of those, the ones that do not compress: ciphertext and keyed hashes (posting_blocks.postings is EXTERNAL since CompactPostingBlocks1766966400000). */
const INCOMPRESSIBLE_COLUMNS: ReadonlyArray<readonly [table: string, columns: readonly string[]]> = [
  ['brain.chunks', ['text', 'term_hashes']],
  ['brain.documents', ['sealed']],
];

/** How long one try waits for a table's exclusive lock, and how many tries a storage change makes. */
const LOCK_WAIT = '2s';
const LOCK_TRIES = 60;

/**
 * `statement` (an ALTER TABLE that takes a table lock briefly: it rewrites nothing) waiting at most
 * LOCK_WAIT for the lock, tried again a second later up to LOCK_TRIES times. Waiting longer behind
 * a merge or a ranking of a replica still running (for ACCESS EXCLUSIVE), or behind a VACUUM (for
 * SHARE UPDATE EXCLUSIVE), would queue every statement needing a conflicting lock behind this one
 * for as long, and hold up the start of every replica, which waits for the migrations.
 */
export async function withShortLockWaits(queryRunner: QueryRunner, statement: string): Promise<void> {
  // Migrations run in a transaction; a down() run by hand may not: then this statement has one of its own.
  const own = !queryRunner.isTransactionActive;
  if (own) await queryRunner.startTransaction();
  try {
    const [{ setting }]: Array<{ setting: string }> = await queryRunner.query(`SELECT current_setting('lock_timeout') AS setting`);
    for (let attempt = 1; ; attempt++) {
      await queryRunner.query('SAVEPOINT short_lock_wait');
      try {
        await queryRunner.query(`SET LOCAL lock_timeout = '${LOCK_WAIT}'`);
        await queryRunner.query(statement);
        await queryRunner.query(`SELECT set_config('lock_timeout', $1, true)`, [setting]);
        await queryRunner.query('RELEASE SAVEPOINT short_lock_wait');
        break;
      } catch (error) {
        // Rolled back to the savepoint: the setting as it was, the transaction usable again.
        await queryRunner.query('ROLLBACK TO SAVEPOINT short_lock_wait');
        if (sqlStateOf(error) !== '55P03' || attempt >= LOCK_TRIES) throw error;
        await sleep(1_000);
      }
    }
    if (own) await queryRunner.commitTransaction();
  } catch (error) {
    if (own) await queryRunner.rollbackTransaction();
    throw error;
  }
}

/**
 * Two kinds of work PostgreSQL did for nothing on the Brain's opaque columns.
 * - ANALYZE collects no statistics of the columns in OPAQUE_COLUMNS (statistics target 0): they
 *   inform no plan, and gathering them was most of ANALYZE's work on these tables (the most common
 *   elements of every sampled chunk's hundred-odd term hashes, 1.7 KB of ciphertext per sampled
 *   chunk: five times the rest, measured on 60,000 such rows), so the autoanalyze that follows a
 *   bulk load (PromptAutovacuum1766707200000) ends sooner.
 * - The columns in INCOMPRESSIBLE_COLUMNS are stored EXTERNAL: moved out of line when a row is
 *   long, as before, but without first trying to compress them. A chunk's row is about 2.7 KB, so
 *   every insert tried pglz on its ciphertext and its hashes and failed (a tenth of PostgreSQL's
 *   time under a bulk load, by `perf`); without the tries, 20,000 such rows went in 38 % faster
 *   on the same storage. It applies to rows written from now on; rows stored before stay as they are.
 *   The change takes each table's exclusive lock for an instant, waiting for it a little at a time
 *   (withShortLockWaits).
 */
export class OpaqueColumns1767139200000 implements MigrationInterface {
  name = 'OpaqueColumns1767139200000';

  async up(queryRunner: QueryRunner): Promise<void> {
    for (const [table, columns] of OPAQUE_COLUMNS) {
      await queryRunner.query(`ALTER TABLE ${table} ${columns.map((column) => `ALTER COLUMN ${column} SET STATISTICS 0`).join(', ')}`);
    }
    for (const [table, columns] of INCOMPRESSIBLE_COLUMNS) {
      await withShortLockWaits(queryRunner, `ALTER TABLE ${table} ${columns.map((column) => `ALTER COLUMN ${column} SET STORAGE EXTERNAL`).join(', ')}`);
    }
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    for (const [table, columns] of OPAQUE_COLUMNS) {
      await queryRunner.query(`ALTER TABLE ${table} ${columns.map((column) => `ALTER COLUMN ${column} SET STATISTICS -1`).join(', ')}`);
    }
    for (const [table, columns] of INCOMPRESSIBLE_COLUMNS) {
      await withShortLockWaits(queryRunner, `ALTER TABLE ${table} ${columns.map((column) => `ALTER COLUMN ${column} SET STORAGE EXTENDED`).join(', ')}`);
    }
  }
}
