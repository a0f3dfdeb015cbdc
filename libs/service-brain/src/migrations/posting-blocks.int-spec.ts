import { randomBytes, randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { KeyEncryptionKey, LocalKeyProvider } from '@mission/crypto';
import { createTestDatabase, TestDatabase } from '@mission/persistence';
import { runWithTenant } from '@mission/tenant-context';
import { BRAIN_MIGRATIONS, openBrainDatabase, openBrainReader } from '../brain-service';
import { DerivedTenantIndexKeys, TermHasher } from '../index/blind-index';
import { rankInMemory } from '../ranking/bm25';
import { decodePostings, encodeSegment } from '../ranking/postings';
import { analyze, termFrequencies } from '../text/analyzer';
import { chunkText } from '../text/chunker';
import { PostingBlocks1766880000000 } from './1766880000000-posting-blocks';
import { CompactPostingBlocks1766966400000 } from './1766966400000-compact-posting-blocks';
import { DocumentFrequenciesFromBlocks1767052800000 } from './1767052800000-document-frequencies-from-blocks';
import { OpaqueColumns1767139200000 } from './1767139200000-opaque-columns';
import { KEY_COLUMNS, KeyColumnStatistics1767225600000 } from './1767225600000-key-column-statistics';

/** Rows in the order PostgreSQL sorts (tenant_id, term_hash, chunk_seq) as uuid and bigints. */
const byTenantTermChunk = (a: { tenant_id: string; term_hash: string; chunk_seq: string }, b: { tenant_id: string; term_hash: string; chunk_seq: string }): number =>
  a.tenant_id !== b.tenant_id
    ? a.tenant_id < b.tenant_id
      ? -1
      : 1
    : a.term_hash !== b.term_hash
      ? BigInt(a.term_hash) < BigInt(b.term_hash)
        ? -1
        : 1
      : Number(a.chunk_seq) - Number(b.chunk_seq);

/** The brain migrations up to `migration`, itself included: a database as its version left it. */
function migrationsThrough(migration: (typeof BRAIN_MIGRATIONS)[number]): typeof BRAIN_MIGRATIONS {
  return BRAIN_MIGRATIONS.slice(0, migrationsBefore(migration).length + 1);
}

/** Each brain column's statistics target (-1: the default) and storage (x extended, e external, m main, p plain), by table and column. */
async function columnSettings(inspector: Client): Promise<Record<string, string>> {
  const { rows } = await inspector.query(
    `SELECT c.relname || '.' || a.attname AS name, coalesce(a.attstattarget::int, -1) || ' ' || a.attstorage::text AS settings
     FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = 'brain' AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped`,
  );
  return Object.fromEntries(rows.map((row: { name: string; settings: string }) => [row.name, row.settings]));
}

/** The brain migrations that run before `migration`: a database as the version before it left it. */
function migrationsBefore(migration: (typeof BRAIN_MIGRATIONS)[number]): typeof BRAIN_MIGRATIONS {
  const position = BRAIN_MIGRATIONS.indexOf(migration);
  if (position < 0) throw new Error(`${migration.name} is not a brain migration`);
  return BRAIN_MIGRATIONS.slice(0, position);
}

const ADMIN_URL = process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

/** A fresh database that the brain migrations before `migration` left, with a client as its (superuser) owner; `close` drops it. */
async function databaseBefore(migration: (typeof BRAIN_MIGRATIONS)[number], prefix: string): Promise<{ database: TestDatabase; inspector: Client; close(): Promise<void> }> {
  const database = await createTestDatabase(ADMIN_URL, prefix);
  const inspector = new Client({ connectionString: database.url });
  await inspector.connect();
  const earlier = await openBrainDatabase(database.url, migrationsBefore(migration));
  await earlier.destroy();
  return {
    database,
    inspector,
    close: async () => {
      await inspector.end();
      await database.drop();
    },
  };
}

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
  let close: (() => Promise<void>) | undefined;
  const secret = randomBytes(32);
  const tenants = [randomUUID(), randomUUID()];

  beforeAll(async () => {
    ({ database, inspector, close } = await databaseBefore(PostingBlocks1766880000000, 'brain_migration_test'));

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
    await close?.();
  });

  it('carries every posting into blocks and every frequency into its chunk, and ranks as before', async () => {
    const postingsBefore = await inspector.query(`SELECT tenant_id, term_hash::text, chunk_seq::text, tf, length FROM brain.postings ORDER BY 1, 2, 3`);
    expect(postingsBefore.rows.length).toBeGreaterThan(50);

    const migrated = await openBrainDatabase(database.url);
    await migrated.destroy();

    const { rows: tables } = await inspector.query(`SELECT to_regclass('brain.postings') AS postings`);
    expect(tables).toEqual([{ postings: null }]);
    // (The inspector is a superuser: it reads every tenant's rows.)
    const blocks = await inspector.query(`SELECT tenant_id, term_hash::text, size, postings FROM brain.posting_blocks`);
    const postingsAfter = blocks.rows
      .flatMap((block: { tenant_id: string; term_hash: string; size: number; postings: Buffer }) => {
        const decoded = decodePostings(block.postings);
        expect(decoded.seqs).toHaveLength(block.size);
        return decoded.seqs.map((seq, index) => ({
          tenant_id: block.tenant_id,
          term_hash: block.term_hash,
          chunk_seq: String(seq),
          tf: decoded.frequencies[index],
          length: decoded.lengths[index],
        }));
      })
      .sort(byTenantTermChunk);
    const frequencies = await inspector.query(
      `SELECT c.tenant_id, u.term_hash::text, c.seq::text AS chunk_seq, u.tf, c.length FROM brain.chunks c
       CROSS JOIN LATERAL unnest(c.term_hashes, c.term_frequencies) AS u(term_hash, tf) ORDER BY 1, 2, 3`,
    );
    expect(postingsAfter).toEqual([...postingsBefore.rows].sort(byTenantTermChunk));
    expect(frequencies.rows).toEqual(postingsBefore.rows);
    const { rows: counts } = await inspector.query(`SELECT count(*)::int AS n, count(DISTINCT (tenant_id, term_hash))::int AS terms FROM brain.posting_blocks`);
    expect(counts[0].n).toBe(counts[0].terms);

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

/**
 * The compact-blocks migration on blocks as PostingBlocks1766880000000 left them (three arrays):
 * each becomes one coded value with its size, its postings sorted by chunk (an append could leave
 * them unsorted), across more blocks than one batch converts.
 */
describe('compact posting blocks migration', () => {
  let database: TestDatabase;
  let inspector: Client;
  let close: (() => Promise<void>) | undefined;
  const tenant = randomUUID();

  beforeAll(async () => {
    ({ database, inspector, close } = await databaseBefore(CompactPostingBlocks1766966400000, 'brain_compact_migration_test'));
  });

  afterAll(async () => {
    await close?.();
  });

  it('codes every block, sorted by chunk, with its size, and drops the arrays', async () => {
    // (The inspector is a superuser: row-level security does not apply to it.)
    await inspector.query(
      `INSERT INTO brain.posting_blocks (tenant_id, term_hash, block, last_seq, chunk_seqs, frequencies, lengths) VALUES
         ($1, 1, 10, 30, '{30,10,20}', '{3,1,2}', '{300,100,200}'),
         ($1, 1, 40, 40, '{40}', '{1}', '{0}'),
         ($1, -5, 1099511627776, 1099511627800, '{1099511627776,1099511627800}', '{7,2147483647}', '{12,2147483647}')`,
      [tenant],
    );
    await inspector.query(
      `INSERT INTO brain.posting_blocks (tenant_id, term_hash, block, last_seq, chunk_seqs, frequencies, lengths)
       SELECT $1, 1000 + n, n, n + 2, ARRAY[n + 2, n], ARRAY[1, 2], ARRAY[n % 300, 7] FROM generate_series(1, 2500) AS n`,
      [tenant],
    );
    const before = await inspector.query(
      `SELECT term_hash::text, block::text, chunk_seqs::text[] AS seqs, frequencies, lengths FROM brain.posting_blocks ORDER BY term_hash, block`,
    );

    const migrated = await openBrainDatabase(database.url);
    await migrated.destroy();

    const { rows: columns } = await inspector.query(
      `SELECT column_name FROM information_schema.columns WHERE table_schema = 'brain' AND table_name = 'posting_blocks' ORDER BY ordinal_position`,
    );
    expect(columns.map((column) => column.column_name)).toEqual(['tenant_id', 'term_hash', 'block', 'last_seq', 'size', 'postings']);
    const after = await inspector.query(`SELECT term_hash::text, block::text, size, postings FROM brain.posting_blocks ORDER BY term_hash, block`);
    expect(after.rows).toHaveLength(2503);
    const expected = before.rows.map((row: { term_hash: string; block: string; seqs: string[]; frequencies: number[]; lengths: number[] }) => {
      const order = row.seqs.map((_, index) => index).sort((a, b) => Number(row.seqs[a]) - Number(row.seqs[b]));
      return {
        term_hash: row.term_hash,
        block: row.block,
        size: row.seqs.length,
        postings: { seqs: order.map((i) => Number(row.seqs[i])), frequencies: order.map((i) => row.frequencies[i]), lengths: order.map((i) => row.lengths[i]) },
      };
    });
    expect(after.rows.map((row: { term_hash: string; block: string; size: number; postings: Buffer }) => ({ ...row, postings: decodePostings(row.postings) }))).toEqual(expected);
    expect(expected[0]).toEqual({
      term_hash: '-5',
      block: '1099511627776',
      size: 2,
      postings: { seqs: [1099511627776, 1099511627800], frequencies: [7, 2147483647], lengths: [12, 2147483647] },
    });
    expect(expected[1]?.postings).toEqual({ seqs: [10, 20, 30], frequencies: [1, 2, 3], lengths: [100, 200, 300] });
    // Row-level security is back on for the owner.
    const { rows: security } = await inspector.query(`SELECT relrowsecurity, relforcerowsecurity FROM pg_class WHERE oid = 'brain.posting_blocks'::regclass`);
    expect(security).toEqual([{ relrowsecurity: true, relforcerowsecurity: true }]);
  });
});

/**
 * Document frequencies read from the posting blocks: term_stats goes, and comes back (undone)
 * holding each term's blocks' sizes summed, under row-level security as before.
 */
describe('document frequencies from blocks migration', () => {
  let database: TestDatabase;
  let inspector: Client;
  let close: (() => Promise<void>) | undefined;
  const [tenantA, tenantB] = [randomUUID(), randomUUID()];

  beforeAll(async () => {
    ({ database, inspector, close } = await databaseBefore(DocumentFrequenciesFromBlocks1767052800000, 'brain_df_migration_test'));
  });

  afterAll(async () => {
    await close?.();
  });

  it('drops term_stats, and undone makes it again from the blocks', async () => {
    // (The inspector is a superuser: row-level security does not apply to it.) Term 7 of A in two blocks.
    const block = (seqs: number[]): Buffer =>
      encodeSegment(
        seqs,
        seqs.map(() => 1),
        seqs.map(() => 10),
      );
    const rows: Array<[string, number, number, number[]]> = [
      [tenantA, 7, 1, [1, 2, 3]],
      [tenantA, 7, 10, [10, 11]],
      [tenantA, -9, 2, [2]],
      [tenantB, 7, 5, [5, 6, 8, 9]],
    ];
    for (const [tenant, term, first, seqs] of rows) {
      await inspector.query(`INSERT INTO brain.posting_blocks (tenant_id, term_hash, block, last_seq, size, postings) VALUES ($1, $2, $3, $4, $5, $6)`, [
        tenant,
        term,
        first,
        seqs[seqs.length - 1],
        seqs.length,
        block(seqs),
      ]);
    }
    await inspector.query(`INSERT INTO brain.term_stats (tenant_id, term_hash, df) VALUES ($1, 7, 5), ($1, -9, 1), ($2, 7, 4)`, [tenantA, tenantB]);

    const migrated = await openBrainDatabase(database.url);
    expect((await inspector.query(`SELECT to_regclass('brain.term_stats') AS term_stats`)).rows).toEqual([{ term_stats: null }]);
    await migrated.destroy();
    // Undone as an operator would, by the owner (the service's data source acts as its role).
    const owner = new DataSource({ type: 'postgres', url: database.url });
    await owner.initialize();
    const runner = owner.createQueryRunner();
    try {
      await runner.startTransaction();
      await new DocumentFrequenciesFromBlocks1767052800000().down(runner);
      await runner.commitTransaction();
    } finally {
      await runner.release();
      await owner.destroy();
    }

    const frequencies = await inspector.query(`SELECT tenant_id, term_hash::int, df FROM brain.term_stats ORDER BY tenant_id = $1 DESC, term_hash`, [tenantA]);
    expect(frequencies.rows).toEqual([
      { tenant_id: tenantA, term_hash: -9, df: 1 },
      { tenant_id: tenantA, term_hash: 7, df: 5 },
      { tenant_id: tenantB, term_hash: 7, df: 4 },
    ]);
    const { rows: security } = await inspector.query(
      `SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity, (SELECT count(*)::int FROM pg_policies p WHERE p.schemaname = 'brain' AND p.tablename = c.relname) AS policies
       FROM pg_class c WHERE c.oid IN ('brain.term_stats'::regclass, 'brain.posting_blocks'::regclass) ORDER BY c.relname`,
    );
    expect(security).toEqual([
      { relname: 'posting_blocks', relrowsecurity: true, relforcerowsecurity: true, policies: 1 },
      { relname: 'term_stats', relrowsecurity: true, relforcerowsecurity: true, policies: 1 },
    ]);
  });
});

/** The opaque columns: no statistics (target 0) and, where they do not compress, no compression tried (EXTERNAL); the defaults again once undone. */
describe('opaque columns migration', () => {
  let database: TestDatabase;
  let inspector: Client;
  let close: (() => Promise<void>) | undefined;

  beforeAll(async () => {
    ({ database, inspector, close } = await databaseBefore(OpaqueColumns1767139200000, 'brain_opaque_migration_test'));
  });

  afterAll(async () => {
    await close?.();
  });

  const columns = (): Promise<Record<string, string>> => columnSettings(inspector);

  it('takes the statistics of ciphertext, coded postings and term lists away, stores what does not compress without trying, and undone sets the defaults again', async () => {
    const before = await columns();
    const migrated = await openBrainDatabase(database.url, migrationsThrough(OpaqueColumns1767139200000));
    await migrated.destroy();
    const after = await columns();
    const expected: Record<string, string> = {
      ...before,
      'chunks.text': '0 e',
      'chunks.term_hashes': '0 e',
      'chunks.term_frequencies': '0 x',
      'posting_blocks.postings': '0 e',
      'documents.sealed': '0 e',
    };
    expect(after).toEqual(expected);
    // Everything else as it was: the keys keep their statistics.
    for (const key of ['chunks.tenant_id', 'chunks.seq', 'posting_blocks.term_hash', 'posting_blocks.block']) expect(after[key]).toBe(before[key]);
    expect(Object.values(before).every((settings) => settings.startsWith('-1 '))).toBe(true);

    // A long text that would compress well is stored as it is: no compression is tried (EXTENDED compresses it).
    const stored = async (): Promise<unknown> => {
      const { rows } = await inspector.query(
        `WITH document AS (
           INSERT INTO brain.documents (id, tenant_id, sealed, content_bytes, chunk_count, created_at)
           VALUES (gen_random_uuid(), gen_random_uuid(), 'enc1.x', 1, 1, now()) RETURNING id, tenant_id
         ), chunk AS (
           INSERT INTO brain.chunks (id, tenant_id, document_id, ordinal, text, length, term_hashes, term_frequencies)
           SELECT gen_random_uuid(), tenant_id, id, 0, repeat('a', 4000), 100, '{1}', '{1}' FROM document RETURNING seq
         )
         SELECT seq FROM chunk`,
      );
      const [{ compression }] = (await inspector.query(`SELECT pg_column_compression(text) AS compression FROM brain.chunks WHERE seq = $1`, [rows[0].seq])).rows;
      return compression;
    };
    expect(await stored()).toBeNull();

    const owner = new DataSource({ type: 'postgres', url: database.url });
    await owner.initialize();
    const runner = owner.createQueryRunner();
    try {
      await new OpaqueColumns1767139200000().down(runner);
    } finally {
      await runner.release();
      await owner.destroy();
    }
    expect(await columns()).toEqual({ ...before, 'posting_blocks.postings': '-1 e' });
    // Compressed again (pglz or lz4, as the server's default_toast_compression says).
    expect(await stored()).not.toBeNull();
  });
});

/** The storage change waits for a table's exclusive lock a little at a time: a long transaction of an older replica delays it without holding up everyone else. */
describe('opaque columns migration beside a long transaction', () => {
  let database: TestDatabase;
  let inspector: Client;
  let close: (() => Promise<void>) | undefined;

  beforeAll(async () => {
    ({ database, inspector, close } = await databaseBefore(OpaqueColumns1767139200000, 'brain_opaque_lock_test'));
  });

  afterAll(async () => {
    await close?.();
  });

  it('waits for a reader of the chunks to finish, lets other readers through meanwhile', async () => {
    const holder = new Client({ connectionString: database.url });
    const reader = new Client({ connectionString: database.url });
    await Promise.all([holder.connect(), reader.connect()]);
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT count(*) FROM brain.chunks');
      const started = Date.now();
      const migrating = openBrainDatabase(database.url);
      // While the migration waits for its lock, another reader gets through within a try's wait (2 s), not after the holder's 6 s.
      await new Promise((resolve) => setTimeout(resolve, 500));
      const asked = Date.now();
      await reader.query('SELECT count(*) FROM brain.chunks');
      expect(Date.now() - asked).toBeLessThan(4_000);
      const released = new Promise<void>((resolve) =>
        setTimeout(() => {
          void holder.query('COMMIT').then(() => resolve());
        }, 6_000),
      );
      const migrated = await migrating;
      await released;
      expect(Date.now() - started).toBeGreaterThanOrEqual(6_000);
      await migrated.destroy();
      const { rows } = await inspector.query(
        `SELECT a.attname, a.attstorage::text AS storage FROM pg_attribute a WHERE a.attrelid = 'brain.chunks'::regclass AND a.attname IN ('text', 'term_hashes') ORDER BY 1`,
      );
      expect(rows).toEqual([
        { attname: 'term_hashes', storage: 'e' },
        { attname: 'text', storage: 'e' },
      ]);
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      await Promise.all([holder.end(), reader.end()]);
    }
  }, 60_000);
});

describe('key column statistics migration', () => {
  let database: TestDatabase;
  let inspector: Client;
  let close: (() => Promise<void>) | undefined;

  beforeAll(async () => {
    ({ database, inspector, close } = await databaseBefore(KeyColumnStatistics1767225600000, 'brain_key_statistics_test'));
  });

  afterAll(async () => {
    await close?.();
  });

  /** The plan of `statement` (EXPLAIN's JSON) as its nodes, `<type> on <index>` for those that scan one, outermost first. */
  async function planOf(statement: string, parameters: unknown[]): Promise<string[]> {
    const { rows } = await inspector.query(`EXPLAIN (FORMAT JSON) ${statement}`, parameters);
    const nodes: string[] = [];
    const visit = (node: { 'Node Type': string; 'Index Name'?: string; Plans?: unknown[] }): void => {
      nodes.push(node['Index Name'] ? `${node['Node Type']} on ${node['Index Name']}` : node['Node Type']);
      for (const child of node.Plans ?? []) visit(child as typeof node);
    };
    visit(rows[0]['QUERY PLAN'][0].Plan);
    return nodes;
  }

  it('samples the key columns at a target of 10, keeps the statements on the indexes the default statistics chose, and undone sets the defaults again', async () => {
    // One large tenant among 39 small ones, more rows than the default's sample: 300 documents of 100
    // chunks and 30,000 terms' blocks against 2 documents of 50 chunks and 200 terms' blocks each.
    await inspector.query(`
      INSERT INTO brain.documents (id, tenant_id, sealed, content_bytes, chunk_count, created_at)
      SELECT md5('d' || d)::uuid, md5('t' || CASE WHEN d < 300 THEN 0 ELSE 1 + (d - 300) % 39 END)::uuid, 'enc1.x', 1, CASE WHEN d < 300 THEN 100 ELSE 50 END, now()
      FROM generate_series(0, 377) AS d`);
    await inspector.query(`
      INSERT INTO brain.chunks (id, tenant_id, document_id, ordinal, text, length, term_hashes, term_frequencies)
      SELECT gen_random_uuid(), d.tenant_id, d.id, o, 'enc1.x', 100, '{1}', '{1}'
      FROM brain.documents d CROSS JOIN LATERAL generate_series(0, d.chunk_count - 1) AS o`);
    await inspector.query(`
      INSERT INTO brain.posting_blocks (tenant_id, term_hash, block, last_seq, size, postings)
      SELECT md5('t' || t)::uuid, h * 7919, 1, 1, 1, '\\x00010101'::bytea
      FROM generate_series(0, 39) AS t CROSS JOIN LATERAL generate_series(1, CASE WHEN t = 0 THEN 30000 ELSE 200 END) AS h`);
    expect((await inspector.query(`SELECT (SELECT count(*) FROM brain.chunks)::int AS chunks, (SELECT count(*) FROM brain.posting_blocks)::int AS blocks`)).rows).toEqual([
      { chunks: 33_900, blocks: 37_800 },
    ]);
    // A document's passages (passagePage), a tenant's terms' blocks (the ranking's BLOCKS), a chunk by its key (the winners),
    // for the large tenant and a small one.
    const plans = async (): Promise<string[][]> => {
      await inspector.query(`ANALYZE brain.chunks, brain.posting_blocks, brain.documents`);
      const all: string[][] = [];
      for (const [tenantNumber, documentNumber] of [
        [0, 7],
        [8, 307],
      ]) {
        const tenant = (await inspector.query(`SELECT md5('t' || $1::int)::uuid AS id`, [tenantNumber])).rows[0].id as string;
        const document = (await inspector.query(`SELECT md5('d' || $1::int)::uuid AS id`, [documentNumber])).rows[0].id as string;
        all.push(
          await planOf(`SELECT id, ordinal, text FROM brain.chunks WHERE tenant_id = $1 AND document_id = $2 AND ordinal > $3 ORDER BY ordinal LIMIT $4`, [
            tenant,
            document,
            -1,
            20,
          ]),
          await planOf(`SELECT term_hash, size, postings FROM brain.posting_blocks WHERE tenant_id = $1 AND term_hash = ANY($2::bigint[])`, [tenant, [7919, 15838]]),
          await planOf(`SELECT id, document_id, text FROM brain.chunks WHERE seq = $1 AND tenant_id = $2`, [1234, tenant]),
        );
      }
      return all;
    };
    const before = await columnSettings(inspector);
    const plansBefore = await plans();

    const migrated = await openBrainDatabase(database.url, migrationsThrough(KeyColumnStatistics1767225600000));
    await migrated.destroy();
    const after = await columnSettings(inspector);
    const expected: Record<string, string> = { ...before };
    for (const [table, columns] of KEY_COLUMNS) {
      for (const column of columns) {
        const name = `${table.replace('brain.', '')}.${column}`;
        expect(before[name]).toMatch(/^-1 /);
        expected[name] = `10 ${before[name]?.split(' ')[1]}`;
      }
    }
    expect(after).toEqual(expected);
    // Every column of the three tables is sampled at 10 or not at all (the opaque ones): none is left at the default.
    for (const [table] of KEY_COLUMNS) {
      const left = Object.entries(after).filter(([name, settings]) => name.startsWith(`${table.replace('brain.', '')}.`) && !/^(10|0) /.test(settings));
      expect(left).toEqual([]);
    }
    expect(after['chunks.text']).toBe('0 e');

    const plansAfter = await plans();
    const { rows: statistics } = await inspector.query(
      `SELECT attname, coalesce(array_length(most_common_vals::text::text[], 1), 0) AS common, coalesce(array_length(histogram_bounds::text::text[], 1), 0) AS bounds
       FROM pg_stats WHERE schemaname = 'brain' AND tablename = 'chunks' AND attname IN ('tenant_id', 'seq')`,
    );
    // Ten most common values at most, eleven histogram bounds at most (the default keeps up to 100 and 101).
    expect(statistics.length).toBe(2);
    for (const row of statistics) expect(row.common <= 10 && row.bounds <= 11).toBe(true);
    // The same index for each, read directly or through a bitmap (the estimates differ a little),
    // and never a sequential scan.
    const indexesOf = (all: string[][]): string[][] => all.map((plan) => plan.filter((node) => node.includes(' on ')).map((node) => node.split(' on ')[1] as string));
    expect(indexesOf(plansAfter)).toEqual(indexesOf(plansBefore));
    const indexes = ['Index Scan on chunks_document', expect.stringMatching(/Index Scan on posting_blocks_pkey$/), 'Index Scan on chunks_pkey'];
    expect(plansAfter.map((plan) => plan.find((node) => / on (chunks_document|posting_blocks_pkey|chunks_pkey)$/.test(node)))).toEqual([...indexes, ...indexes]);
    expect(plansAfter.flat().some((node) => node.startsWith('Seq Scan'))).toBe(false);

    const owner = new DataSource({ type: 'postgres', url: database.url });
    await owner.initialize();
    const runner = owner.createQueryRunner();
    try {
      await new KeyColumnStatistics1767225600000().down(runner);
    } finally {
      await runner.release();
      await owner.destroy();
    }
    expect(await columnSettings(inspector)).toEqual(before);
  }, 60_000);
});

/** The statistics change waits for each table's lock a little at a time: a VACUUM holding it delays the migration, which then completes. */
describe('key column statistics migration beside a VACUUM', () => {
  let database: TestDatabase;
  let close: (() => Promise<void>) | undefined;

  beforeAll(async () => {
    ({ database, close } = await databaseBefore(KeyColumnStatistics1767225600000, 'brain_key_statistics_lock_test'));
  });

  afterAll(async () => {
    await close?.();
  });

  it('waits past a lock timeout for the table, while writes go on, then sets the targets', async () => {
    const holder = new Client({ connectionString: database.url });
    const writer = new Client({ connectionString: database.url });
    await Promise.all([holder.connect(), writer.connect()]);
    try {
      // What a VACUUM or ANALYZE holds (it does not give way to the migration as autovacuum would).
      await holder.query('BEGIN');
      await holder.query('LOCK TABLE brain.posting_blocks IN SHARE UPDATE EXCLUSIVE MODE');
      const started = Date.now();
      const migrating = openBrainDatabase(database.url, migrationsThrough(KeyColumnStatistics1767225600000));
      await new Promise((resolve) => setTimeout(resolve, 500));
      const asked = Date.now();
      await writer.query(`INSERT INTO brain.posting_blocks (tenant_id, term_hash, block, last_seq, size, postings) VALUES (gen_random_uuid(), 1, 1, 1, 1, '\\x00010101'::bytea)`);
      expect(Date.now() - asked).toBeLessThan(2_000);
      const released = new Promise<void>((resolve) =>
        setTimeout(() => {
          void holder.query('COMMIT').then(() => resolve());
        }, 5_000),
      );
      const migrated = await migrating;
      await released;
      expect(Date.now() - started).toBeGreaterThanOrEqual(5_000);
      await migrated.destroy();
      const settings = await columnSettings(writer);
      expect([settings['posting_blocks.term_hash'], settings['chunks.seq'], settings['unmerged_chunks.chunk_seq']].map((value) => value?.split(' ')[0])).toEqual([
        '10',
        '10',
        '10',
      ]);
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      await Promise.all([holder.end(), writer.end()]);
    }
  }, 60_000);
});
