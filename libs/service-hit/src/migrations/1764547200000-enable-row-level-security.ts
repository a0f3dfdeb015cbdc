import { MigrationInterface, QueryRunner } from 'typeorm';
import { createServiceRole, enableTenantRls } from '@mission/persistence';

/** Row-level security on HIT items; hit-service's queries run as the service role from here on. */
export class EnableRowLevelSecurity1764547200000 implements MigrationInterface {
  name = 'EnableRowLevelSecurity1764547200000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await createServiceRole(queryRunner, 'hit');
    await enableTenantRls(queryRunner, 'hit', 'hit_items');
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP POLICY IF EXISTS tenant_isolation ON hit.hit_items`);
    await queryRunner.query(`ALTER TABLE hit.hit_items NO FORCE ROW LEVEL SECURITY`);
    await queryRunner.query(`ALTER TABLE hit.hit_items DISABLE ROW LEVEL SECURITY`);
  }
}
