import { MigrationInterface, QueryRunner } from 'typeorm';
import { enableTenantRls } from '@mission/persistence';

/**
 * A term's document frequency is the sum of its posting blocks' sizes, read with the blocks, and
 * `brain.term_stats` goes. It held the same number written a second time: every merge upserted one
 * row per distinct term of its batch beside that term's new block, about a quarter of PostgreSQL's
 * time during a bulk load, and every deletion took its chunks out of both. Earlier brain-service
 * versions read and write the table: stop them before this migration runs (k8s/README.md,
 * upgrade notes).
 */
export class DocumentFrequenciesFromBlocks1767052800000 implements MigrationInterface {
  name = 'DocumentFrequenciesFromBlocks1767052800000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE brain.term_stats`);
  }

  /** The table again, filled from the blocks (as the owner, past row-level security, within this migration's transaction). */
  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE brain.term_stats (
        tenant_id uuid NOT NULL,
        term_hash bigint NOT NULL,
        df integer NOT NULL CHECK (df > 0),
        PRIMARY KEY (tenant_id, term_hash)
      )`);
    await enableTenantRls(queryRunner, 'brain', 'term_stats');
    await queryRunner.query(
      `ALTER TABLE brain.term_stats SET (autovacuum_vacuum_insert_scale_factor = 0.01, autovacuum_vacuum_insert_threshold = 10000, autovacuum_analyze_scale_factor = 0.01, autovacuum_analyze_threshold = 10000)`,
    );
    for (const table of ['posting_blocks', 'term_stats']) await queryRunner.query(`ALTER TABLE brain.${table} NO FORCE ROW LEVEL SECURITY`);
    await queryRunner.query(
      `INSERT INTO brain.term_stats (tenant_id, term_hash, df) SELECT tenant_id, term_hash, sum(size)::int FROM brain.posting_blocks GROUP BY tenant_id, term_hash`,
    );
    for (const table of ['posting_blocks', 'term_stats']) await queryRunner.query(`ALTER TABLE brain.${table} FORCE ROW LEVEL SECURITY`);
  }
}
