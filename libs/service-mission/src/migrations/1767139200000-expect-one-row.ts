import { MigrationInterface, QueryRunner } from 'typeorm';
import { serviceRoleName } from '@mission/persistence';

/**
 * `mission.expect_one_row(n)` raises SQLSTATE `MS409` unless `n` is 1. A transition the runner
 * works out from the version of a mission it wrote or read last updates the row only if it still
 * holds that version (`WHERE sealed = …`, in a statement that passes the updated rows' count to
 * this function): when another writer got there first, the error rolls back the whole
 * transaction (its outbox rows with it), and the runner decides again on the locked row.
 */
export class ExpectOneRow1767139200000 implements MigrationInterface {
  name = 'ExpectOneRow1767139200000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE FUNCTION mission.expect_one_row(n bigint) RETURNS void
      LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
      BEGIN
        IF n IS DISTINCT FROM 1 THEN
          RAISE EXCEPTION 'the mission changed since it was read (% rows updated)', coalesce(n, 0) USING ERRCODE = 'MS409';
        END IF;
      END
      $$`);
    await queryRunner.query(`REVOKE ALL ON FUNCTION mission.expect_one_row(bigint) FROM PUBLIC`);
    await queryRunner.query(`GRANT EXECUTE ON FUNCTION mission.expect_one_row(bigint) TO "${serviceRoleName('mission')}"`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP FUNCTION mission.expect_one_row(bigint)`);
  }
}
