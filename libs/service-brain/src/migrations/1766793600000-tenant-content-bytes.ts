import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The bytes of content each tenant stores, beside its document count: what its storage quota is
 * checked against on every ingestion, in the same locked row. Filled from the documents already
 * stored (row-level security is lifted for the owner within this migration's transaction only).
 */
export class TenantContentBytes1766793600000 implements MigrationInterface {
  name = 'TenantContentBytes1766793600000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE brain.tenant_stats ADD COLUMN content_bytes bigint NOT NULL DEFAULT 0`);
    await queryRunner.query(`ALTER TABLE brain.tenant_stats NO FORCE ROW LEVEL SECURITY`);
    await queryRunner.query(`ALTER TABLE brain.documents NO FORCE ROW LEVEL SECURITY`);
    await queryRunner.query(
      `UPDATE brain.tenant_stats s SET content_bytes = totals.bytes
       FROM (SELECT tenant_id, sum(content_bytes)::bigint AS bytes FROM brain.documents GROUP BY tenant_id) totals
       WHERE s.tenant_id = totals.tenant_id`,
    );
    await queryRunner.query(`ALTER TABLE brain.documents FORCE ROW LEVEL SECURITY`);
    await queryRunner.query(`ALTER TABLE brain.tenant_stats FORCE ROW LEVEL SECURITY`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE brain.tenant_stats DROP COLUMN content_bytes`);
  }
}
