import { MigrationInterface, QueryRunner } from 'typeorm';

export class TenantStorageQuota1766793600000 implements MigrationInterface {
  name = 'TenantStorageQuota1766793600000';

  async up(queryRunner: QueryRunner): Promise<void> {
    // An enterprise tenant's own storage quota (documents, bytes of content in the Brain); null: its tier's.
    await queryRunner.query(
      `ALTER TABLE identity.tenants ADD COLUMN storage_documents bigint CHECK (storage_documents >= 0), ADD COLUMN storage_bytes bigint CHECK (storage_bytes >= 0)`,
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE identity.tenants DROP COLUMN storage_documents, DROP COLUMN storage_bytes`);
  }
}
