import { MigrationInterface, QueryRunner } from 'typeorm';
import { outboxTableSql, processedMessagesTableSql } from '@mission/persistence';

export class CreateHitItems1763769600000 implements MigrationInterface {
  name = 'CreateHitItems1763769600000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE hit.hit_items (
        id uuid PRIMARY KEY,
        tenant_id uuid NOT NULL,
        mission_id uuid NOT NULL,
        step_index int NOT NULL,
        title text NOT NULL,
        description text,
        status text NOT NULL CHECK (status IN ('pending','approved','rejected','cancelled')),
        comment text,
        decided_by text,
        decided_at timestamptz,
        created_at timestamptz NOT NULL,
        updated_at timestamptz NOT NULL,
        UNIQUE (tenant_id, mission_id, step_index)
      )`);
    await queryRunner.query(`CREATE INDEX hit_items_pending ON hit.hit_items (tenant_id, created_at, id) WHERE status = 'pending'`);
    for (const sql of [...outboxTableSql('hit'), ...processedMessagesTableSql('hit')]) await queryRunner.query(sql);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE hit.processed_messages`);
    await queryRunner.query(`DROP TABLE hit.outbox`);
    await queryRunner.query(`DROP TABLE hit.hit_items`);
  }
}
