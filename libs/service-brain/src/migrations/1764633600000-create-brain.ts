import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The document store and its inverted index. Terms appear only as keyed hashes (bigint): the
 * schema holds no plaintext term. Every table leads with the tenant, and every statistic BM25
 * needs (chunk count, total length, document frequency) is kept per tenant.
 */
export class CreateBrain1764633600000 implements MigrationInterface {
  name = 'CreateBrain1764633600000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE brain.documents (
        id uuid PRIMARY KEY,
        tenant_id uuid NOT NULL,
        title text NOT NULL,
        source text,
        metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
        content_bytes integer NOT NULL,
        chunk_count integer NOT NULL,
        created_at timestamptz NOT NULL
      )`);
    await queryRunner.query(`CREATE INDEX documents_tenant_created ON brain.documents (tenant_id, created_at DESC, id DESC)`);
    // seq: a compact, insertion-ordered key for postings (a term's postings then lie in heap order).
    await queryRunner.query(`
      CREATE TABLE brain.chunks (
        seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        id uuid NOT NULL,
        tenant_id uuid NOT NULL,
        document_id uuid NOT NULL REFERENCES brain.documents (id) ON DELETE CASCADE,
        ordinal integer NOT NULL,
        text text NOT NULL,
        length integer NOT NULL,
        term_hashes bigint[] NOT NULL
      )`);
    await queryRunner.query(`CREATE INDEX chunks_document ON brain.chunks (tenant_id, document_id, ordinal)`);
    // One row per (term, chunk). The primary key serves queries by index-only scans.
    await queryRunner.query(`
      CREATE TABLE brain.postings (
        tenant_id uuid NOT NULL,
        term_hash bigint NOT NULL,
        chunk_seq bigint NOT NULL,
        tf integer NOT NULL,
        length integer NOT NULL,
        PRIMARY KEY (tenant_id, term_hash, chunk_seq) INCLUDE (tf, length)
      )`);
    await queryRunner.query(`
      CREATE TABLE brain.term_stats (
        tenant_id uuid NOT NULL,
        term_hash bigint NOT NULL,
        df integer NOT NULL CHECK (df > 0),
        PRIMARY KEY (tenant_id, term_hash)
      )`);
    await queryRunner.query(`
      CREATE TABLE brain.tenant_stats (
        tenant_id uuid PRIMARY KEY,
        document_count bigint NOT NULL CHECK (document_count >= 0),
        chunk_count bigint NOT NULL CHECK (chunk_count >= 0),
        total_length bigint NOT NULL CHECK (total_length >= 0),
        key_check bigint NOT NULL,
        updated_at timestamptz NOT NULL
      )`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE brain.tenant_stats, brain.term_stats, brain.postings, brain.chunks, brain.documents`);
  }
}
