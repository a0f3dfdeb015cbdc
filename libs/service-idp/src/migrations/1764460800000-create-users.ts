import { MigrationInterface, QueryRunner } from 'typeorm';

export class CreateUsers1764460800000 implements MigrationInterface {
  name = 'CreateUsers1764460800000';

  async up(queryRunner: QueryRunner): Promise<void> {
    // A client with redirect URIs may also sign a tenant's users in (authorization_code + PKCE).
    await queryRunner.query(`ALTER TABLE identity.clients ADD COLUMN redirect_uris text[] NOT NULL DEFAULT '{}'`);
    // password_hash holds an scrypt hash, never the password. Usernames are stored lower-cased:
    // unique within a tenant regardless of case.
    await queryRunner.query(`
      CREATE TABLE identity.users (
        id uuid PRIMARY KEY,
        tenant_id uuid NOT NULL REFERENCES identity.tenants (id) ON DELETE CASCADE,
        username text NOT NULL CHECK (username = lower(username) AND length(username) BETWEEN 1 AND 100),
        password_hash text NOT NULL CHECK (password_hash LIKE 'scrypt$%'),
        scopes text[] NOT NULL CHECK (cardinality(scopes) > 0),
        created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
        CONSTRAINT users_username_per_tenant UNIQUE (tenant_id, username)
      )`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE identity.users`);
    await queryRunner.query(`ALTER TABLE identity.clients DROP COLUMN redirect_uris`);
  }
}
