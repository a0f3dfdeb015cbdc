import { MigrationInterface, QueryRunner } from 'typeorm';
import { createDataKeysTable } from '@mission/persistence';

/**
 * Document content becomes ciphertext at rest: the tenant's data keys (wrapped by the KEK) in
 * `brain.data_keys`, a document's title, source and metadata in `documents.sealed`, and each
 * chunk's text sealed in place (`chunks.text` holds `enc1.…`). The index itself was already blind
 * (keyed term hashes), so ranking does not change. Older rows keep their plaintext.
 */
export class SealBrainContent1764892800000 implements MigrationInterface {
  name = 'SealBrainContent1764892800000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await createDataKeysTable(queryRunner, 'brain');
    await queryRunner.query(`ALTER TABLE brain.documents ADD COLUMN sealed text`);
    await queryRunner.query(`ALTER TABLE brain.documents ALTER COLUMN title DROP NOT NULL`);
    await queryRunner.query(`ALTER TABLE brain.documents ALTER COLUMN metadata DROP NOT NULL`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE brain.documents DROP COLUMN sealed`);
    await queryRunner.query(`DROP TABLE brain.data_keys`);
  }
}
