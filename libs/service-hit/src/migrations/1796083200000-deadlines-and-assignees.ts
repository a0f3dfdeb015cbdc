import { MigrationInterface, QueryRunner } from 'typeorm';
import { allowOwnerSweep, serviceRoleName } from '@mission/persistence';

/**
 * Deadlines and assignees of approval items. `expires_at`: when a pending item expires (its step's
 * `expiresIn` after it was created); `assignees`: the user names that alone may decide it, in
 * clear like `decided_by` (they select the rows of `assignedTo=me`), lower-case. An item past its
 * deadline becomes `expired`. Due items are found across tenants only through the SECURITY DEFINER
 * function, which returns their ids and nothing else; each is then expired under its own tenant.
 */
export class DeadlinesAndAssignees1796083200000 implements MigrationInterface {
  name = 'DeadlinesAndAssignees1796083200000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      ALTER TABLE hit.hit_items
        ADD COLUMN expires_at timestamptz,
        ADD COLUMN assignees text[] CHECK (assignees IS NULL OR cardinality(assignees) BETWEEN 1 AND 20),
        DROP CONSTRAINT hit_items_status_check,
        ADD CONSTRAINT hit_items_status_check CHECK (status IN ('pending', 'approved', 'rejected', 'cancelled', 'expired'))`);
    await queryRunner.query(`CREATE INDEX hit_items_expiring ON hit.hit_items (expires_at) WHERE status = 'pending' AND expires_at IS NOT NULL`);
    await allowOwnerSweep(queryRunner, 'hit', 'hit_items');
    await queryRunner.query(`
      CREATE FUNCTION hit.due_expiries(max_rows integer) RETURNS TABLE (tenant_id uuid, id uuid)
      LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
        SELECT tenant_id, id FROM hit.hit_items
        WHERE status = 'pending' AND expires_at IS NOT NULL AND expires_at <= now()
        ORDER BY expires_at
        LIMIT least(greatest(max_rows, 0), 1000)
      $$`);
    await queryRunner.query(`REVOKE ALL ON FUNCTION hit.due_expiries(integer) FROM PUBLIC`);
    await queryRunner.query(`GRANT EXECUTE ON FUNCTION hit.due_expiries(integer) TO "${serviceRoleName('hit')}"`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP FUNCTION hit.due_expiries(integer)`);
    await queryRunner.query(`DROP POLICY owner_sweep ON hit.hit_items`);
    await queryRunner.query(`DROP INDEX hit.hit_items_expiring`);
    // Every tenant's rows: the owner is held to row-level security too (FORCE) until this is done.
    await queryRunner.query(`ALTER TABLE hit.hit_items NO FORCE ROW LEVEL SECURITY`);
    await queryRunner.query(`UPDATE hit.hit_items SET status = 'cancelled' WHERE status = 'expired'`);
    await queryRunner.query(`ALTER TABLE hit.hit_items FORCE ROW LEVEL SECURITY`);
    await queryRunner.query(`
      ALTER TABLE hit.hit_items
        DROP CONSTRAINT hit_items_status_check,
        ADD CONSTRAINT hit_items_status_check CHECK (status IN ('pending', 'approved', 'rejected', 'cancelled')),
        DROP COLUMN assignees,
        DROP COLUMN expires_at`);
  }
}
