import { randomBytes, randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { KeyEncryptionKey, LocalKeyProvider } from '@mission/crypto';
import { createTestDatabase, openServiceDatabase, serviceRoleName, TestDatabase } from '@mission/persistence';
import { runWithTenant } from '@mission/tenant-context';
import { openBrainDatabase, openBrainReader } from '../brain-service';
import { BRAIN_SCHEMA } from '../brain/brain.service';
import { DerivedTenantIndexKeys, TermHasher } from '../index/blind-index';
import { rankInMemory } from '../ranking/bm25';
import { analyze, termFrequencies } from '../text/analyzer';
import { chunkText } from '../text/chunker';
import { CreateBrain1764633600000 } from './1764633600000-create-brain';
import { EnableRowLevelSecurity1764720000000 } from './1764720000000-enable-row-level-security';
import { SealBrainContent1764892800000 } from './1764892800000-seal-brain-content';
import { PromptAutovacuum1766707200000 } from './1766707200000-prompt-autovacuum';
import { TenantContentBytes1766793600000 } from './1766793600000-tenant-content-bytes';

const ADMIN_URL = process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

const DOCUMENTS = [
  { title: 'Transistor amplifiers', content: 'A transistor amplifier raises the power of a signal. Bipolar transistors and field effect transistors both amplify.' },
  { title: 'Microwave dielectrics', content: 'The dielectric constant of liquids is measured with microwave techniques in a resonant cavity. '.repeat(30) },
  { title: 'Ferrite devices', content: 'Ferrite isolators and circulators pass microwave power in one direction only.' },
  { title: 'Stop words only', content: 'The of and to a in is that for it.' },
];

/**
 * The posting-blocks migration on a database that an earlier brain-service filled (one postings
 * row per term and chunk, written here as that version wrote them): the rankings stay the same,
 * score for score, and every posting, frequency and statistic is carried over.
 */
describe('posting blocks migration', () => {
  let database: TestDatabase;
  let inspector: Client;
  const secret = randomBytes(32);
  const tenants = [randomUUID(), randomUUID()];

  beforeAll(async () => {
    database = await createTestDatabase(ADMIN_URL, 'brain_migration_test');
    inspector = new Client({ connectionString: database.url });
    await inspector.connect();
    const earlier = await openServiceDatabase({
      url: database.url,
      schema: BRAIN_SCHEMA,
      entities: [],
      migrations: [CreateBrain1764633600000, EnableRowLevelSecurity1764720000000, SealBrainContent1764892800000, PromptAutovacuum1766707200000, TenantContentBytes1766793600000],
      applicationName: 'brain-migration-test',
      serviceRole: serviceRoleName(BRAIN_SCHEMA),
    });
    await earlier.destroy();

    // What the earlier ingestion stored (plaintext content, as stored before sealing), each tenant's
    // rows in its own setting as the service wrote them.
    for (const tenantId of tenants) {
      const hasher = new TermHasher(await new DerivedTenantIndexKeys(secret).keyFor(tenantId));
      await inspector.query('BEGIN');
      await inspector.query(`SELECT set_config('app.tenant_id', $1, true)`, [tenantId]);
      let chunkCount = 0;
      let totalLength = 0;
      const df = new Map<string, number>();
      for (const document of DOCUMENTS) {
        const id = randomUUID();
        const texts = chunkText(document.content);
        await inspector.query(`INSERT INTO brain.documents (id, tenant_id, title, metadata, content_bytes, chunk_count, created_at) VALUES ($1, $2, $3, '{}', $4, $5, now())`, [
          id,
          tenantId,
          document.title,
          Buffer.byteLength(document.content),
          texts.length,
        ]);
        for (const [ordinal, text] of texts.entries()) {
          const frequencies = termFrequencies([...analyze(text), ...analyze(document.title)]);
          const hashes = [...frequencies.keys()].map((term) => hasher.hash(term));
          const length = [...frequencies.values()].reduce((sum, tf) => sum + tf, 0);
          const { rows } = await inspector.query(
            `INSERT INTO brain.chunks (id, tenant_id, document_id, ordinal, text, length, term_hashes) VALUES ($1, $2, $3, $4, $5, $6, $7::bigint[]) RETURNING seq`,
            [randomUUID(), tenantId, id, ordinal, text, length, hashes],
          );
          for (const [index, hash] of hashes.entries()) {
            await inspector.query(`INSERT INTO brain.postings (tenant_id, term_hash, chunk_seq, tf, length) VALUES ($1, $2, $3, $4, $5)`, [
              tenantId,
              hash,
              rows[0].seq,
              [...frequencies.values()][index],
              length,
            ]);
            df.set(hash, (df.get(hash) ?? 0) + 1);
          }
          chunkCount += 1;
          totalLength += length;
        }
      }
      for (const [hash, n] of df) await inspector.query(`INSERT INTO brain.term_stats (tenant_id, term_hash, df) VALUES ($1, $2, $3)`, [tenantId, hash, n]);
      await inspector.query(
        `INSERT INTO brain.tenant_stats (tenant_id, document_count, chunk_count, total_length, content_bytes, key_check, updated_at) VALUES ($1, $2, $3, $4, 0, $5, now())`,
        [tenantId, DOCUMENTS.length, chunkCount, totalLength, hasher.keyCheck()],
      );
      await inspector.query('COMMIT');
    }
  });

  afterAll(async () => {
    await inspector?.end();
    await database?.drop();
  });

  it('carries every posting into blocks and every frequency into its chunk, and ranks as before', async () => {
    const postingsBefore = await inspector.query(`SELECT tenant_id, term_hash::text, chunk_seq::text, tf, length FROM brain.postings ORDER BY 1, 2, 3`);
    expect(postingsBefore.rows.length).toBeGreaterThan(50);

    const migrated = await openBrainDatabase(database.url);
    await migrated.destroy();

    const { rows: tables } = await inspector.query(`SELECT to_regclass('brain.postings') AS postings`);
    expect(tables).toEqual([{ postings: null }]);
    // (The inspector is a superuser: it reads every tenant's rows.)
    const postingsAfter = await inspector.query(
      `SELECT b.tenant_id, b.term_hash::text, u.chunk_seq::text, u.tf, u.length FROM brain.posting_blocks b
       CROSS JOIN LATERAL unnest(b.chunk_seqs, b.frequencies, b.lengths) AS u(chunk_seq, tf, length) ORDER BY 1, 2, 3`,
    );
    const frequencies = await inspector.query(
      `SELECT c.tenant_id, u.term_hash::text, c.seq::text AS chunk_seq, u.tf, c.length FROM brain.chunks c
       CROSS JOIN LATERAL unnest(c.term_hashes, c.term_frequencies) AS u(term_hash, tf) ORDER BY 1, 2, 3`,
    );
    expect(postingsAfter.rows).toEqual(postingsBefore.rows);
    expect(frequencies.rows).toEqual(postingsBefore.rows);
    const { rows: blocks } = await inspector.query(`SELECT count(*)::int AS n, count(DISTINCT (tenant_id, term_hash))::int AS terms FROM brain.posting_blocks`);
    expect(blocks[0].n).toBe(blocks[0].terms);

    // Ranked from the blocks as the reference ranks the same chunks.
    const chunks = DOCUMENTS.flatMap((document) =>
      chunkText(document.content).map((text) => {
        const terms = termFrequencies([...analyze(text), ...analyze(document.title)]);
        return { id: text, terms, length: [...terms.values()].reduce((a, b) => a + b, 0) };
      }),
    );
    const reader = await openBrainReader({ databaseUrl: database.url, indexKeys: secret, keys: new LocalKeyProvider(KeyEncryptionKey.generate()) });
    try {
      for (const tenantId of tenants) {
        for (const q of ['microwave power', 'transistor amplifier', 'dielectric liquids cavity']) {
          const expected = rankInMemory(termFrequencies(analyze(q)), chunks);
          const actual = await runWithTenant({ tenantId }, () => reader.search(q, 50));
          expect(actual.map((r) => r.text)).toEqual(expected.map((r) => r.id));
          actual.forEach((result, index) => expect(result.score).toBeCloseTo(expected[index]?.score ?? NaN, 8));
        }
      }
    } finally {
      await reader.close();
    }
  });
});
