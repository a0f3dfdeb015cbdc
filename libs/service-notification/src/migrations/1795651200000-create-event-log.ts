import { MigrationInterface, QueryRunner } from 'typeorm';
import { allowOwnerSweep, createDataKeysTable, createServiceRole, enableTenantRls, outboxTableSql, serviceRoleName } from '@mission/persistence';

/**
 * The tenants' event logs. `positions` holds each tenant's last position: a writer locks that row
 * for its transaction, so a tenant's events are numbered 1, 2, 3, … in the order they commit, with
 * no gap (a rolled-back writer gives its number back). An event's `data` is sealed under the
 * tenant's data keys like every other service's content. A delivered event is recorded once
 * (`source_message_id`), and announced on `notify.events.v1` through the outbox in the same
 * transaction, so a gateway streaming the log is told of every event. Old events are deleted across tenants only through the SECURITY DEFINER
 * function, oldest first, so what a tenant's log keeps stays contiguous.
 */
export class CreateEventLog1795651200000 implements MigrationInterface {
  name = 'CreateEventLog1795651200000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE notify.positions (
        tenant_id uuid PRIMARY KEY,
        last_position bigint NOT NULL CHECK (last_position >= 0)
      )`);
    await queryRunner.query(`
      CREATE TABLE notify.events (
        tenant_id uuid NOT NULL,
        position bigint NOT NULL CHECK (position > 0),
        nonce text NOT NULL,
        type text NOT NULL,
        mission_id uuid NOT NULL,
        data text NOT NULL,
        occurred_at timestamptz NOT NULL,
        recorded_at timestamptz NOT NULL,
        source_message_id text NOT NULL,
        PRIMARY KEY (tenant_id, position),
        UNIQUE (tenant_id, source_message_id)
      )`);
    await queryRunner.query(`CREATE INDEX events_mission ON notify.events (tenant_id, mission_id, position)`);
    await queryRunner.query(`CREATE INDEX events_recorded ON notify.events (recorded_at)`);
    // Each recorded event is announced to the gateways (notify.events.v1) through the outbox.
    for (const sql of outboxTableSql('notify')) await queryRunner.query(sql);
    await createServiceRole(queryRunner, 'notify');
    await createDataKeysTable(queryRunner, 'notify');
    await enableTenantRls(queryRunner, 'notify', 'positions');
    await enableTenantRls(queryRunner, 'notify', 'events');
    await allowOwnerSweep(queryRunner, 'notify', 'events');
    await queryRunner.query(`CREATE POLICY owner_expiry ON notify.events FOR DELETE TO CURRENT_USER USING (true)`);
    await queryRunner.query(`
      CREATE FUNCTION notify.delete_expired_events(older_than_days integer, max_rows integer) RETURNS integer
      LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
        WITH expired AS (
          SELECT tenant_id, position FROM notify.events
          WHERE recorded_at < now() - make_interval(days => greatest(older_than_days, 7))
          ORDER BY recorded_at
          LIMIT least(greatest(max_rows, 0), 10000)
        ), deleted AS (
          DELETE FROM notify.events v USING expired e
          WHERE v.tenant_id = e.tenant_id AND v.position = e.position
          RETURNING 1
        )
        SELECT count(*)::integer FROM deleted
      $$`);
    await queryRunner.query(`REVOKE ALL ON FUNCTION notify.delete_expired_events(integer, integer) FROM PUBLIC`);
    await queryRunner.query(`GRANT EXECUTE ON FUNCTION notify.delete_expired_events(integer, integer) TO "${serviceRoleName('notify')}"`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP FUNCTION notify.delete_expired_events(integer, integer)`);
    await queryRunner.query(`DROP TABLE notify.outbox, notify.events, notify.positions, notify.data_keys`);
  }
}
