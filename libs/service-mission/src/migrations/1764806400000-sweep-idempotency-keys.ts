import { MigrationInterface, QueryRunner } from 'typeorm';
import { allowOwnerSweep, serviceRoleName } from '@mission/persistence';

/**
 * Expired Idempotency-Keys are deleted across tenants by mission-service's housekeeping, which
 * runs outside any tenant and so sees no rows under row-level security: it goes through this
 * SECURITY DEFINER function, which can only delete keys older than the given age, in batches.
 */
export class SweepIdempotencyKeys1764806400000 implements MigrationInterface {
  name = 'SweepIdempotencyKeys1764806400000';

  async up(queryRunner: QueryRunner): Promise<void> {
    // Row-level security is forced on the owner too: it may read and delete any tenant's keys, and
    // does so only inside the function below.
    await allowOwnerSweep(queryRunner, 'mission', 'idempotency_keys');
    await queryRunner.query(`CREATE POLICY owner_expiry ON mission.idempotency_keys FOR DELETE TO CURRENT_USER USING (true)`);
    await queryRunner.query(`
      CREATE FUNCTION mission.delete_expired_idempotency_keys(older_than_hours integer, max_rows integer) RETURNS integer
      LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
        WITH expired AS (
          SELECT tenant_id, key FROM mission.idempotency_keys
          WHERE created_at < now() - make_interval(hours => greatest(older_than_hours, 24))
          ORDER BY created_at
          LIMIT least(greatest(max_rows, 0), 10000)
        ), deleted AS (
          DELETE FROM mission.idempotency_keys k USING expired e
          WHERE k.tenant_id = e.tenant_id AND k.key = e.key
          RETURNING 1
        )
        SELECT count(*)::integer FROM deleted
      $$`);
    await queryRunner.query(`REVOKE ALL ON FUNCTION mission.delete_expired_idempotency_keys(integer, integer) FROM PUBLIC`);
    await queryRunner.query(`GRANT EXECUTE ON FUNCTION mission.delete_expired_idempotency_keys(integer, integer) TO "${serviceRoleName('mission')}"`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP FUNCTION mission.delete_expired_idempotency_keys(integer, integer)`);
    await queryRunner.query(`DROP POLICY owner_expiry ON mission.idempotency_keys`);
    await queryRunner.query(`DROP POLICY owner_sweep ON mission.idempotency_keys`);
  }
}
