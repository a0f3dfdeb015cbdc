import { MigrationInterface, QueryRunner } from 'typeorm';
import { serviceRoleName } from '@mission/persistence';

/**
 * A queued or running mission waits for its current step's reply as a message, never inside a handler.
 * `next_check_at` is when the runner looks at it again if nothing arrived by then (a lost reply,
 * or a retry after a dependency was unavailable); `mission.missions_due` lists those missions
 * across tenants, ids and tenants only, as `unfinished_missions` does.
 */
export class StepChecks1766620800000 implements MigrationInterface {
  name = 'StepChecks1766620800000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE mission.missions ADD COLUMN next_check_at timestamptz`);
    await queryRunner.query(`CREATE INDEX missions_due ON mission.missions (next_check_at) WHERE status IN ('queued', 'running') AND next_check_at IS NOT NULL`);
    await queryRunner.query(`
      CREATE FUNCTION mission.missions_due(max_rows integer) RETURNS TABLE (id uuid, tenant_id uuid)
      LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
        SELECT m.id, m.tenant_id FROM mission.missions m
        WHERE m.status IN ('queued', 'running') AND m.next_check_at IS NOT NULL AND m.next_check_at <= now()
        ORDER BY m.next_check_at
        LIMIT least(greatest(max_rows, 0), 1000)
      $$`);
    await queryRunner.query(`REVOKE ALL ON FUNCTION mission.missions_due(integer) FROM PUBLIC`);
    await queryRunner.query(`GRANT EXECUTE ON FUNCTION mission.missions_due(integer) TO "${serviceRoleName('mission')}"`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP FUNCTION mission.missions_due(integer)`);
    await queryRunner.query(`DROP INDEX mission.missions_due`);
    await queryRunner.query(`ALTER TABLE mission.missions DROP COLUMN next_check_at`);
  }
}
