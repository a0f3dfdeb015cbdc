import { MigrationInterface, QueryRunner } from 'typeorm';
import { allowOwnerSweep, createServiceRole, enableTenantRls, serviceRoleName } from '@mission/persistence';

/**
 * Row-level security on the tenant-owned tables; mission-service's queries run as the service
 * role from here on. The one sweep across tenants, resuming unfinished missions after a restart,
 * reads only (id, tenant_id) through a SECURITY DEFINER function.
 */
export class EnableRowLevelSecurity1764547200000 implements MigrationInterface {
  name = 'EnableRowLevelSecurity1764547200000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await createServiceRole(queryRunner, 'mission');
    await enableTenantRls(queryRunner, 'mission', 'missions');
    await enableTenantRls(queryRunner, 'mission', 'idempotency_keys');
    await allowOwnerSweep(queryRunner, 'mission', 'missions');
    await queryRunner.query(`
      CREATE FUNCTION mission.unfinished_missions(max_rows integer) RETURNS TABLE (id uuid, tenant_id uuid)
      LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
        SELECT m.id, m.tenant_id FROM mission.missions m
        WHERE m.status IN ('queued', 'running')
        ORDER BY m.updated_at
        LIMIT least(greatest(max_rows, 0), 1000)
      $$`);
    await queryRunner.query(`REVOKE ALL ON FUNCTION mission.unfinished_missions(integer) FROM PUBLIC`);
    await queryRunner.query(`GRANT EXECUTE ON FUNCTION mission.unfinished_missions(integer) TO "${serviceRoleName('mission')}"`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP FUNCTION mission.unfinished_missions(integer)`);
    for (const table of ['missions', 'idempotency_keys']) {
      await queryRunner.query(`DROP POLICY IF EXISTS tenant_isolation ON mission.${table}`);
      await queryRunner.query(`ALTER TABLE mission.${table} NO FORCE ROW LEVEL SECURITY`);
      await queryRunner.query(`ALTER TABLE mission.${table} DISABLE ROW LEVEL SECURITY`);
    }
    await queryRunner.query(`DROP POLICY IF EXISTS owner_sweep ON mission.missions`);
  }
}
