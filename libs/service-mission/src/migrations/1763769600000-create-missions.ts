import { MigrationInterface, QueryRunner } from 'typeorm';
import { outboxTableSql, processedMessagesTableSql } from '@mission/persistence';

export class CreateMissions1763769600000 implements MigrationInterface {
  name = 'CreateMissions1763769600000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE mission.missions (
        id uuid PRIMARY KEY,
        tenant_id uuid NOT NULL,
        title text NOT NULL,
        objective text NOT NULL,
        input jsonb,
        steps jsonb NOT NULL,
        metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
        status text NOT NULL CHECK (status IN ('queued','running','awaiting_approval','succeeded','failed','rejected','cancelled')),
        result jsonb,
        error jsonb,
        created_at timestamptz NOT NULL,
        updated_at timestamptz NOT NULL,
        completed_at timestamptz
      )`);
    await queryRunner.query(`CREATE INDEX missions_tenant_created ON mission.missions (tenant_id, created_at DESC, id DESC)`);
    await queryRunner.query(`CREATE INDEX missions_unfinished ON mission.missions (updated_at) WHERE status IN ('queued','running')`);
    for (const sql of [...outboxTableSql('mission'), ...processedMessagesTableSql('mission')]) await queryRunner.query(sql);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE mission.processed_messages`);
    await queryRunner.query(`DROP TABLE mission.outbox`);
    await queryRunner.query(`DROP TABLE mission.missions`);
  }
}
