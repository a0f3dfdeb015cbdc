import { MigrationInterface, QueryRunner } from 'typeorm';

export class CreateIdentity1763769600000 implements MigrationInterface {
  name = 'CreateIdentity1763769600000';

  async up(queryRunner: QueryRunner): Promise<void> {
    // The tier list is a snapshot of contracts' TIERS at this version; a new tier is a new migration.
    await queryRunner.query(`
      CREATE TABLE identity.tenants (
        id uuid PRIMARY KEY,
        name text NOT NULL,
        tier text NOT NULL CHECK (tier IN ('starter','business','professional','enterprise')),
        rpm integer CHECK (rpm > 0),
        created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
        CONSTRAINT tenants_rpm_only_for_enterprise CHECK ((tier = 'enterprise') = (rpm IS NOT NULL))
      )`);
    // secret_hash holds an scrypt hash, never the secret: a read of this table yields no credential.
    await queryRunner.query(`
      CREATE TABLE identity.clients (
        client_id text PRIMARY KEY,
        tenant_id uuid NOT NULL REFERENCES identity.tenants (id) ON DELETE CASCADE,
        secret_hash text NOT NULL CHECK (secret_hash LIKE 'scrypt$%'),
        scopes text[] NOT NULL CHECK (cardinality(scopes) > 0),
        created_at timestamptz NOT NULL DEFAULT clock_timestamp()
      )`);
    await queryRunner.query(`CREATE INDEX clients_tenant ON identity.clients (tenant_id)`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE identity.clients`);
    await queryRunner.query(`DROP TABLE identity.tenants`);
  }
}
