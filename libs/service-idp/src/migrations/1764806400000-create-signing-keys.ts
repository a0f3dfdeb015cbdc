import { MigrationInterface, QueryRunner } from 'typeorm';

export class CreateSigningKeys1764806400000 implements MigrationInterface {
  name = 'CreateSigningKeys1764806400000';

  async up(queryRunner: QueryRunner): Promise<void> {
    // The provider's signing keys. `private_jwk` is an AES-256-GCM envelope (key-encryption key
    // from configuration, the kid as associated data), cleared when the key retires.
    await queryRunner.query(`
      CREATE TABLE identity.signing_keys (
        kid text PRIMARY KEY,
        private_jwk text,
        state text NOT NULL CHECK (state IN ('published', 'signing', 'retiring', 'retired')),
        created_at timestamptz NOT NULL,
        activates_at timestamptz NOT NULL,
        retires_at timestamptz,
        CHECK (state = 'retired' OR private_jwk IS NOT NULL),
        CHECK (state NOT IN ('retiring', 'retired') OR retires_at IS NOT NULL)
      )`);
    // One key signs, and one rotation is pending at most.
    await queryRunner.query(`CREATE UNIQUE INDEX signing_keys_one_signing ON identity.signing_keys (state) WHERE state = 'signing'`);
    await queryRunner.query(`CREATE UNIQUE INDEX signing_keys_one_published ON identity.signing_keys (state) WHERE state = 'published'`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE identity.signing_keys`);
  }
}
