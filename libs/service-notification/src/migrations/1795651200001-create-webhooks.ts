import { MigrationInterface, QueryRunner } from 'typeorm';
import { allowOwnerSweep, enableTenantRls, serviceRoleName } from '@mission/persistence';

/**
 * Webhooks: a tenant's subscriptions (URL, description and signing secret sealed), and one delivery
 * per event and webhook, created with the event in the same transaction (so none is lost), its
 * attempt counted before each request goes out (so a crash never loses one) and its last answer
 * kept. Due
 * deliveries are claimed across tenants only through the SECURITY DEFINER function, which leases
 * them so that replicas never send one twice at once.
 */
export class CreateWebhooks1795651200001 implements MigrationInterface {
  name = 'CreateWebhooks1795651200001';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE notify.webhooks (
        id uuid PRIMARY KEY,
        tenant_id uuid NOT NULL,
        events text[] NOT NULL,
        sealed text NOT NULL,
        created_at timestamptz NOT NULL
      )`);
    await queryRunner.query(`CREATE INDEX webhooks_tenant ON notify.webhooks (tenant_id, created_at DESC, id DESC)`);
    await queryRunner.query(`
      CREATE TABLE notify.deliveries (
        id uuid PRIMARY KEY,
        tenant_id uuid NOT NULL,
        webhook_id uuid NOT NULL REFERENCES notify.webhooks (id) ON DELETE CASCADE,
        event_id text NOT NULL,
        event_type text NOT NULL,
        payload text NOT NULL,
        state text NOT NULL CHECK (state IN ('pending', 'succeeded', 'failed')),
        attempts integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
        next_attempt_at timestamptz,
        response_status integer,
        error text,
        created_at timestamptz NOT NULL,
        updated_at timestamptz NOT NULL,
        UNIQUE (webhook_id, event_id)
      )`);
    await queryRunner.query(`CREATE INDEX deliveries_due ON notify.deliveries (next_attempt_at) WHERE state = 'pending'`);
    await queryRunner.query(`CREATE INDEX deliveries_webhook ON notify.deliveries (tenant_id, webhook_id, created_at DESC, id DESC)`);
    await queryRunner.query(`CREATE INDEX deliveries_webhook_due ON notify.deliveries (webhook_id, next_attempt_at, created_at) WHERE state = 'pending'`);
    for (const table of ['webhooks', 'deliveries']) await enableTenantRls(queryRunner, 'notify', table);
    // The owner may read and lease due deliveries of every tenant (and list the webhooks to find
    // them), and does so only in the function below.
    await allowOwnerSweep(queryRunner, 'notify', 'webhooks');
    await allowOwnerSweep(queryRunner, 'notify', 'deliveries');
    await queryRunner.query(`CREATE POLICY owner_lease ON notify.deliveries FOR UPDATE TO CURRENT_USER USING (true)`);
    await queryRunner.query(`
      CREATE FUNCTION notify.lease_due_deliveries(max_rows integer, lease_seconds integer, per_webhook integer, busy uuid[])
        RETURNS TABLE (tenant_id uuid, id uuid, webhook_id uuid, attempts integer, event_id text, payload text, sealed text)
      LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
        WITH due AS (
          -- Each webhook's oldest due deliveries, its share at most, read by index per webhook: one
          -- backlogged webhook never fills a pass, and a long backlog costs a pass nothing more.
          SELECT d.id, d.next_attempt_at, d.created_at FROM notify.webhooks w
          CROSS JOIN LATERAL (
            SELECT d.id, d.next_attempt_at, d.created_at FROM notify.deliveries d
            WHERE d.webhook_id = w.id AND d.state = 'pending' AND d.next_attempt_at <= now()
            ORDER BY d.next_attempt_at, d.created_at
            LIMIT greatest(per_webhook, 1)
            FOR UPDATE OF d SKIP LOCKED
          ) d
          WHERE NOT (w.id = ANY(coalesce(busy, '{}')))
          ORDER BY d.next_attempt_at, d.created_at
          LIMIT least(greatest(max_rows, 0), 1000)
        )
        -- Leasing a delivery counts its attempt: a crash from here on never loses one. What the
        -- attempt needs comes back sealed (the caller opens it under the tenant's keys).
        UPDATE notify.deliveries d SET next_attempt_at = now() + make_interval(secs => greatest(lease_seconds, 1)), attempts = d.attempts + 1, updated_at = clock_timestamp()
        FROM due, notify.webhooks w WHERE d.id = due.id AND w.id = d.webhook_id
        RETURNING d.tenant_id, d.id, d.webhook_id, d.attempts, d.event_id, d.payload, w.sealed
      $$`);
    await queryRunner.query(`REVOKE ALL ON FUNCTION notify.lease_due_deliveries(integer, integer, integer, uuid[]) FROM PUBLIC`);
    await queryRunner.query(`GRANT EXECUTE ON FUNCTION notify.lease_due_deliveries(integer, integer, integer, uuid[]) TO "${serviceRoleName('notify')}"`);
    // Delivered or given-up deliveries leave with the log's retention.
    await queryRunner.query(`CREATE POLICY owner_expiry ON notify.deliveries FOR DELETE TO CURRENT_USER USING (true)`);
    await queryRunner.query(`
      CREATE FUNCTION notify.delete_expired_deliveries(older_than_days integer, max_rows integer) RETURNS integer
      LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
        WITH expired AS (
          SELECT id FROM notify.deliveries
          WHERE state <> 'pending' AND created_at < now() - make_interval(days => greatest(older_than_days, 7))
          ORDER BY created_at
          LIMIT least(greatest(max_rows, 0), 10000)
        ), deleted AS (
          DELETE FROM notify.deliveries d USING expired e WHERE d.id = e.id RETURNING 1
        )
        SELECT count(*)::integer FROM deleted
      $$`);
    await queryRunner.query(`REVOKE ALL ON FUNCTION notify.delete_expired_deliveries(integer, integer) FROM PUBLIC`);
    await queryRunner.query(`GRANT EXECUTE ON FUNCTION notify.delete_expired_deliveries(integer, integer) TO "${serviceRoleName('notify')}"`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP FUNCTION notify.delete_expired_deliveries(integer, integer)`);
    await queryRunner.query(`DROP FUNCTION notify.lease_due_deliveries(integer, integer, integer, uuid[])`);
    await queryRunner.query(`DROP TABLE notify.deliveries, notify.webhooks`);
  }
}
