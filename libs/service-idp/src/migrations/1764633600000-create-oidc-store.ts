import { MigrationInterface, QueryRunner } from 'typeorm';

export class CreateOidcStore1764633600000 implements MigrationInterface {
  name = 'CreateOidcStore1764633600000';

  async up(queryRunner: QueryRunner): Promise<void> {
    // The provider's artefacts (sessions, interactions, grants, codes, refresh tokens), shared by
    // every idp replica. `key` is a hash of the artefact's id: for codes and opaque tokens the id
    // is the credential itself, which is therefore never stored.
    await queryRunner.query(`
      CREATE TABLE identity.oidc_artefacts (
        model text NOT NULL,
        key text NOT NULL,
        payload jsonb NOT NULL,
        grant_id text,
        uid text,
        user_code text,
        expires_at timestamptz,
        PRIMARY KEY (model, key)
      )`);
    await queryRunner.query(`CREATE INDEX oidc_artefacts_grant ON identity.oidc_artefacts (grant_id) WHERE grant_id IS NOT NULL`);
    await queryRunner.query(`CREATE INDEX oidc_artefacts_uid ON identity.oidc_artefacts (model, uid) WHERE uid IS NOT NULL`);
    await queryRunner.query(`CREATE INDEX oidc_artefacts_expiry ON identity.oidc_artefacts (expires_at) WHERE expires_at IS NOT NULL`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE identity.oidc_artefacts`);
  }
}
