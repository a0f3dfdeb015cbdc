import { MigrationInterface, QueryRunner } from 'typeorm';
import { encodePostings, wholeNumbers } from '../ranking/postings';

/** Blocks converted per statement: up to a million postings (a block holds at most 4,096), held in memory as text and numbers. */
const BATCH = 250;

/**
 * A posting block's chunks, frequencies and lengths in one `postings` value, delta-coded varints
 * (see ranking/postings.ts), with their count in `size`, instead of three arrays: 3 to 4 bytes a
 * posting instead of 16, and ranking reads them in the service instead of aggregating them in SQL.
 * `postings` is stored uncompressed (STORAGE EXTERNAL): varints hardly compress, and reading them
 * should cost a copy only.
 *
 * Every block is rewritten here, its postings sorted by chunk (an earlier append could leave them
 * unsorted), 250 at a time, with row-level security lifted for the owner within this migration's
 * transaction only. brain-service's earlier versions read and write the arrays: stop them before
 * this migration runs.
 */
export class CompactPostingBlocks1766966400000 implements MigrationInterface {
  name = 'CompactPostingBlocks1766966400000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE brain.posting_blocks ADD COLUMN size integer, ADD COLUMN postings bytea`);
    await queryRunner.query(`ALTER TABLE brain.posting_blocks ALTER COLUMN postings SET STORAGE EXTERNAL`);
    // The arrays are emptied as each block is converted, so the rewritten rows do not carry them.
    for (const column of ['chunk_seqs', 'frequencies', 'lengths']) await queryRunner.query(`ALTER TABLE brain.posting_blocks ALTER COLUMN ${column} DROP NOT NULL`);
    await queryRunner.query(`ALTER TABLE brain.posting_blocks NO FORCE ROW LEVEL SECURITY`);
    let after: { tenant: string; term: string; block: string } | undefined;
    for (;;) {
      const rows: Array<{ tenant: string; term: string; block: string; seqs: string; frequencies: string; lengths: string }> = await queryRunner.query(
        `SELECT tenant_id AS tenant, term_hash::text AS term, block::text AS block, chunk_seqs::text AS seqs, frequencies::text AS frequencies, lengths::text AS lengths
         FROM brain.posting_blocks
         ${after ? 'WHERE (tenant_id, term_hash, block) > ($2::uuid, $3::bigint, $4::bigint)' : ''}
         ORDER BY tenant_id, term_hash, block LIMIT $1`,
        after ? [BATCH, after.tenant, after.term, after.block] : [BATCH],
      );
      if (rows.length === 0) break;
      const postings = rows.map((row) => ({ seqs: wholeNumbers(row.seqs), frequencies: wholeNumbers(row.frequencies), lengths: wholeNumbers(row.lengths) }));
      await queryRunner.query(
        `UPDATE brain.posting_blocks b SET size = u.size, postings = u.postings, chunk_seqs = NULL, frequencies = NULL, lengths = NULL
         FROM unnest($1::uuid[], $2::bigint[], $3::bigint[], $4::int[], $5::bytea[]) AS u(tenant_id, term_hash, block, size, postings)
         WHERE b.tenant_id = u.tenant_id AND b.term_hash = u.term_hash AND b.block = u.block`,
        [rows.map((row) => row.tenant), rows.map((row) => row.term), rows.map((row) => row.block), postings.map((block) => block.seqs.length), postings.map(encodePostings)],
      );
      const last = rows[rows.length - 1];
      if (!last || rows.length < BATCH) break;
      after = last;
    }
    await queryRunner.query(`ALTER TABLE brain.posting_blocks FORCE ROW LEVEL SECURITY`);
    await queryRunner.query(`ALTER TABLE brain.posting_blocks DROP COLUMN chunk_seqs, DROP COLUMN frequencies, DROP COLUMN lengths`);
    await queryRunner.query(`ALTER TABLE brain.posting_blocks ALTER COLUMN size SET NOT NULL, ALTER COLUMN postings SET NOT NULL`);
    await queryRunner.query(`ALTER TABLE brain.posting_blocks ADD CONSTRAINT posting_blocks_size CHECK (size > 0 AND octet_length(postings) >= 1 + 3 * size)`);
  }

  async down(): Promise<void> {
    throw new Error('CompactPostingBlocks1766966400000 cannot be undone: restore a backup taken before it (PostingBlocks1766880000000 before it cannot be undone either)');
  }
}
