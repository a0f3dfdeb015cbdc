import { MigrationInterface, QueryRunner } from 'typeorm';
import { createDataKeysTable } from '@mission/persistence';

/**
 * Tenant content at rest becomes ciphertext: the tenant's data keys (wrapped by the KEK) in
 * `mission.data_keys`, a mission's content in `missions.sealed`. The plaintext columns stay for
 * rows written before; each is emptied when its row is next written.
 */
export class SealMissionContent1764892800000 implements MigrationInterface {
  name = 'SealMissionContent1764892800000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await createDataKeysTable(queryRunner, 'mission');
    await queryRunner.query(`ALTER TABLE mission.missions ADD COLUMN sealed text`);
    for (const column of ['title', 'objective', 'steps', 'metadata']) await queryRunner.query(`ALTER TABLE mission.missions ALTER COLUMN ${column} DROP NOT NULL`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE mission.missions DROP COLUMN sealed`);
    await queryRunner.query(`DROP TABLE mission.data_keys`);
  }
}
