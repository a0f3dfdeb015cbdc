import { MigrationInterface, QueryRunner } from 'typeorm';
import { createDataKeysTable } from '@mission/persistence';

/**
 * What people write becomes ciphertext at rest: the tenant's data keys (wrapped by the KEK) in
 * `hit.data_keys`, an item's title, description and comment in `hit_items.sealed`, and the
 * `hit.decided` events waiting in the outbox sealed too. Plaintext columns stay for older rows
 * until they are next written.
 */
export class SealHitContent1764892800000 implements MigrationInterface {
  name = 'SealHitContent1764892800000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await createDataKeysTable(queryRunner, 'hit');
    await queryRunner.query(`ALTER TABLE hit.hit_items ADD COLUMN sealed text`);
    await queryRunner.query(`ALTER TABLE hit.hit_items ALTER COLUMN title DROP NOT NULL`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE hit.hit_items DROP COLUMN sealed`);
    await queryRunner.query(`DROP TABLE hit.data_keys`);
  }
}
