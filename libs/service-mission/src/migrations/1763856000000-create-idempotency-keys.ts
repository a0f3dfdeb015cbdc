import { MigrationInterface, QueryRunner } from 'typeorm';

export class CreateIdempotencyKeys1763856000000 implements MigrationInterface {
  name = 'CreateIdempotencyKeys1763856000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE mission.idempotency_keys (
        tenant_id uuid NOT NULL,
        key text NOT NULL,
        request_hash text NOT NULL,
        mission_id uuid NOT NULL,
        created_at timestamptz NOT NULL,
        PRIMARY KEY (tenant_id, key)
      )`);
    await queryRunner.query(`CREATE INDEX idempotency_keys_created ON mission.idempotency_keys (created_at)`);
    await queryRunner.query(`CREATE INDEX missions_tenant_status_created ON mission.missions (tenant_id, status, created_at DESC, id DESC)`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX mission.missions_tenant_status_created`);
    await queryRunner.query(`DROP TABLE mission.idempotency_keys`);
  }
}
