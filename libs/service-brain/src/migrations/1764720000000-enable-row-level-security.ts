import { MigrationInterface, QueryRunner } from 'typeorm';
import { createServiceRole, enableTenantRls } from '@mission/persistence';

const TENANT_TABLES = ['documents', 'chunks', 'postings', 'term_stats', 'tenant_stats'] as const;

/** Row-level security on every Brain table; brain-service's queries run as the service role from here on. */
export class EnableRowLevelSecurity1764720000000 implements MigrationInterface {
  name = 'EnableRowLevelSecurity1764720000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await createServiceRole(queryRunner, 'brain');
    for (const table of TENANT_TABLES) await enableTenantRls(queryRunner, 'brain', table);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    for (const table of TENANT_TABLES) {
      await queryRunner.query(`DROP POLICY IF EXISTS tenant_isolation ON brain.${table}`);
      await queryRunner.query(`ALTER TABLE brain.${table} NO FORCE ROW LEVEL SECURITY`);
      await queryRunner.query(`ALTER TABLE brain.${table} DISABLE ROW LEVEL SECURITY`);
    }
  }
}
