import { MigrationInterface, QueryRunner } from 'typeorm';
import { allowOwnerSweep, enableTenantRls, serviceRoleName } from '@mission/persistence';

/**
 * The inverted index in blocks instead of one row per (term, chunk). Ingestion no longer writes
 * postings: a document's chunks (each with its terms and their frequencies: `term_frequencies`,
 * parallel to `term_hashes`) wait in `unmerged_chunks`, and a merge turns every waiting chunk of a
 * tenant into one `posting_blocks` row per term, with the chunks, frequencies and lengths as
 * arrays (or appends them to the term's newest block while that is small), and adds their document
 * frequencies to `term_stats` once per term. Under a bulk load a merge takes many documents at
 * once, so a common word costs one row per merge instead of one per chunk. Queries read the blocks
 * and the waiting chunks, so a document is found as soon as it is stored.
 *
 * The postings already stored become blocks of up to 4,096 chunk sequence numbers, and the chunks
 * get their frequencies from them (row-level security is lifted for the owner within this
 * migration's transaction only). brain-service's earlier versions write postings: stop them
 * before this migration runs.
 */
export class PostingBlocks1766880000000 implements MigrationInterface {
  name = 'PostingBlocks1766880000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE brain.posting_blocks (
        tenant_id uuid NOT NULL,
        term_hash bigint NOT NULL,
        block bigint NOT NULL,
        last_seq bigint NOT NULL,
        chunk_seqs bigint[] NOT NULL,
        frequencies integer[] NOT NULL,
        lengths integer[] NOT NULL,
        PRIMARY KEY (tenant_id, term_hash, block),
        CHECK (cardinality(chunk_seqs) > 0 AND cardinality(frequencies) = cardinality(chunk_seqs) AND cardinality(lengths) = cardinality(chunk_seqs))
      )`);
    await queryRunner.query(
      `COMMENT ON COLUMN brain.posting_blocks.block IS 'The block among its term''s blocks: no higher than the lowest chunk_seq it holds, as last_seq is no lower than the highest'`,
    );
    await queryRunner.query(`
      CREATE TABLE brain.unmerged_chunks (
        tenant_id uuid NOT NULL,
        chunk_seq bigint NOT NULL,
        PRIMARY KEY (tenant_id, chunk_seq)
      )`);
    await queryRunner.query(`ALTER TABLE brain.chunks ADD COLUMN term_frequencies integer[]`);

    for (const table of ['chunks', 'postings', 'posting_blocks']) await queryRunner.query(`ALTER TABLE brain.${table} NO FORCE ROW LEVEL SECURITY`);
    await queryRunner.query(
      `UPDATE brain.chunks c SET term_frequencies = f.frequencies
       FROM (
         SELECT c2.seq, array_agg(p.tf ORDER BY u.position) AS frequencies
         FROM brain.chunks c2
         CROSS JOIN LATERAL unnest(c2.term_hashes) WITH ORDINALITY AS u(term_hash, position)
         JOIN brain.postings p ON p.tenant_id = c2.tenant_id AND p.term_hash = u.term_hash AND p.chunk_seq = c2.seq
         GROUP BY c2.seq
       ) f
       WHERE c.seq = f.seq`,
    );
    await queryRunner.query(`UPDATE brain.chunks SET term_frequencies = '{}' WHERE term_frequencies IS NULL`);
    await queryRunner.query(
      `INSERT INTO brain.posting_blocks (tenant_id, term_hash, block, last_seq, chunk_seqs, frequencies, lengths)
       SELECT tenant_id, term_hash, min(chunk_seq), max(chunk_seq), array_agg(chunk_seq ORDER BY chunk_seq), array_agg(tf ORDER BY chunk_seq), array_agg(length ORDER BY chunk_seq)
       FROM brain.postings
       GROUP BY tenant_id, term_hash, chunk_seq >> 12`,
    );
    for (const table of ['chunks', 'posting_blocks']) await queryRunner.query(`ALTER TABLE brain.${table} FORCE ROW LEVEL SECURITY`);
    await queryRunner.query(`ALTER TABLE brain.chunks ALTER COLUMN term_frequencies SET NOT NULL`);
    await queryRunner.query(`ALTER TABLE brain.chunks ADD CONSTRAINT chunks_term_frequencies CHECK (cardinality(term_frequencies) = cardinality(term_hashes))`);
    await queryRunner.query(`DROP TABLE brain.postings`);

    await enableTenantRls(queryRunner, 'brain', 'posting_blocks');
    await enableTenantRls(queryRunner, 'brain', 'unmerged_chunks');
    // After a crash between an ingestion and its merge, the service finds the tenants to merge for.
    await allowOwnerSweep(queryRunner, 'brain', 'unmerged_chunks');
    await queryRunner.query(`
      CREATE FUNCTION brain.tenants_with_unmerged_chunks(max_rows integer) RETURNS TABLE (tenant_id uuid)
      LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
        SELECT u.tenant_id FROM brain.unmerged_chunks u GROUP BY u.tenant_id ORDER BY min(u.chunk_seq) LIMIT least(greatest(max_rows, 0), 1000)
      $$`);
    await queryRunner.query(`REVOKE ALL ON FUNCTION brain.tenants_with_unmerged_chunks(integer) FROM PUBLIC`);
    await queryRunner.query(`GRANT EXECUTE ON FUNCTION brain.tenants_with_unmerged_chunks(integer) TO "${serviceRoleName('brain')}"`);
    // What the operators watch: chunks stored and searchable but not merged into the index yet (all tenants, a count only).
    await queryRunner.query(`
      CREATE FUNCTION brain.unmerged_chunk_count() RETURNS bigint
      LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
        SELECT count(*) FROM brain.unmerged_chunks
      $$`);
    await queryRunner.query(`REVOKE ALL ON FUNCTION brain.unmerged_chunk_count() FROM PUBLIC`);
    await queryRunner.query(`GRANT EXECUTE ON FUNCTION brain.unmerged_chunk_count() TO "${serviceRoleName('brain')}"`);
    for (const table of ['brain.posting_blocks', 'brain.unmerged_chunks']) {
      await queryRunner.query(
        `ALTER TABLE ${table} SET (autovacuum_vacuum_insert_scale_factor = 0.01, autovacuum_vacuum_insert_threshold = 10000, autovacuum_analyze_scale_factor = 0.01, autovacuum_analyze_threshold = 1000)`,
      );
    }
  }

  async down(): Promise<void> {
    throw new Error('PostingBlocks1766880000000 cannot be undone: the per-chunk postings it replaced are gone (restore a backup taken before it)');
  }
}
