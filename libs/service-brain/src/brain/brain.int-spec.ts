import { randomBytes, randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import {
  BrainDocumentView,
  BrainQueryResult,
  BRAIN_LIMITS,
  ErrorCode,
  IngestedDocumentView,
  Messages,
  MessageTypes,
  Page,
  type PassageView,
  type PayloadOf,
  Topics,
} from '@mission/contracts';
import { InProcessBroker, InProcessBus, requestMessage } from '@mission/messaging';
import { KeyEncryptionKey, LocalKeyProvider } from '@mission/crypto';
import { createTestDatabase, isPreparationProbe, sentStatement, TestDatabase } from '@mission/persistence';
import { runWithTenant } from '@mission/tenant-context';
import fc from 'fast-check';
import { RecordCipher } from '@mission/persistence';
import { BrainServiceHandle, openBrainDatabase, openBrainReader, startBrainService } from '../brain-service';
import { DerivedTenantIndexKeys } from '../index/blind-index';
import { BrainRepository, CONTRIBUTION, RANKING_SETTINGS } from './brain.repository';
import { BRAIN_SCHEMA, BrainService, LOADING_GATHER_FACTOR, MIN_QUIET_MS } from './brain.service';
import { BM25_DEFAULTS, rankInMemory } from '../ranking/bm25';
import { contribution, decodePostings } from '../ranking/postings';
import { DEFAULT_PRUNING } from '../ranking/pruning';
import { analyze, termFrequencies } from '../text/analyzer';
import { chunkText, DEFAULT_CHUNKING } from '../text/chunker';
import { domainErrorOf } from '@mission/messaging/testing';

const ADMIN_URL = process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const KEYS = new LocalKeyProvider(KeyEncryptionKey.generate());

const CORPUS = [
  { title: 'Transistor amplifiers', content: 'A transistor amplifier raises the power of a signal. Bipolar transistors and field effect transistors both amplify.' },
  { title: 'Microwave dielectrics', content: 'The dielectric constant of liquids is measured with microwave techniques in a resonant cavity.' },
  { title: 'Ferrite devices', content: 'Ferrite isolators and circulators pass microwave power in one direction only.' },
  { title: 'Digital computers', content: 'An electronic digital computer stores its program in memory and executes instructions in sequence.' },
  { title: 'Antenna arrays', content: 'Phased antenna arrays steer a radio beam without moving parts, by shifting the phase of each element.' },
  { title: 'Superconductivity', content: 'Below its critical temperature a superconductor carries current without resistance.' },
];

describe('brain on PostgreSQL', () => {
  let database: TestDatabase;
  let inspector: Client;
  const secret = randomBytes(32);
  const broker = new InProcessBroker();
  const serviceBus = new InProcessBus(broker);
  const client = new InProcessBus(broker);
  let brain: BrainServiceHandle;

  const as = <T>(tenantId: string, work: () => Promise<T>): Promise<T> => runWithTenant({ tenantId }, work);
  const ingest = (tenantId: string, body: unknown): Promise<IngestedDocumentView> =>
    as(tenantId, () => client.request<IngestedDocumentView>(Topics.brainRequests, MessageTypes.brainDocumentIngest, body, { timeoutMs: 120_000 }));
  const query = (tenantId: string, q: string, k = 10): Promise<BrainQueryResult> =>
    as(tenantId, () => client.request<BrainQueryResult>(Topics.brainRequests, MessageTypes.brainQuery, { q, k }));
  const get = (tenantId: string, id: string): Promise<BrainDocumentView> => as(tenantId, () => client.request(Topics.brainRequests, MessageTypes.brainDocumentGet, { id }));
  const list = (tenantId: string, params: Record<string, unknown> = {}): Promise<Page<BrainDocumentView>> =>
    as(tenantId, () => client.request(Topics.brainRequests, MessageTypes.brainDocumentList, params));
  const remove = (tenantId: string, id: string): Promise<unknown> => as(tenantId, () => client.request(Topics.brainRequests, MessageTypes.brainDocumentDelete, { id }));

  const passages = (tenantId: string, params: PayloadOf<typeof Messages.brainDocumentPassages>): Promise<Page<PassageView>> =>
    as(tenantId, () => requestMessage(client, Messages.brainDocumentPassages, params));

  async function seed(tenantId: string): Promise<Map<string, string>> {
    const ids = new Map<string, string>();
    for (const document of CORPUS) ids.set(document.title, (await ingest(tenantId, document)).id);
    return ids;
  }

  /** Waits until no chunk of the tenant waits for a merge (merges run in the background after each ingestion). */
  async function merged(tenantId: string): Promise<void> {
    const deadline = Date.now() + 20_000;
    for (;;) {
      const { rows } = await inspector.query(`SELECT count(*)::int AS n FROM brain.unmerged_chunks WHERE tenant_id = $1`, [tenantId]);
      if (rows[0].n === 0) return;
      if (Date.now() > deadline) throw new Error(`${rows[0].n} chunks of tenant ${tenantId} still wait for a merge`);
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }

  /**
   * What the tenant's statistics and posting blocks hold, and what its documents and chunks say
   * they should hold, once its merges are done: totals, document frequencies, and every posting
   * (term, chunk, frequency, length).
   */
  const byTermAndChunk = (a: { term_hash: string; chunk_seq?: string }, b: { term_hash: string; chunk_seq?: string }): number =>
    a.term_hash === b.term_hash ? Number(a.chunk_seq) - Number(b.chunk_seq) : BigInt(a.term_hash) < BigInt(b.term_hash) ? -1 : 1;

  async function statisticsOf(tenantId: string): Promise<{ stored: unknown; derived: unknown }> {
    await merged(tenantId);
    const stored = await inspector.query(`SELECT document_count::int, chunk_count::int, total_length::int FROM brain.tenant_stats WHERE tenant_id = $1`, [tenantId]);
    const derived = await inspector.query(
      `SELECT (SELECT count(*)::int FROM brain.documents WHERE tenant_id = $1) AS document_count,
              (SELECT count(*)::int FROM brain.chunks WHERE tenant_id = $1) AS chunk_count,
              (SELECT coalesce(sum(length), 0)::int FROM brain.chunks WHERE tenant_id = $1) AS total_length`,
      [tenantId],
    );
    const dfStored = await inspector.query(`SELECT term_hash::text, sum(size)::int AS df FROM brain.posting_blocks WHERE tenant_id = $1 GROUP BY term_hash ORDER BY term_hash`, [
      tenantId,
    ]);
    const dfDerived = await inspector.query(
      `SELECT u.term_hash::text, count(*)::int AS df FROM brain.chunks c CROSS JOIN LATERAL unnest(c.term_hashes) AS u(term_hash)
       WHERE c.tenant_id = $1 GROUP BY u.term_hash ORDER BY 1`,
      [tenantId],
    );
    // The blocks decoded here, each block's size checked against what it holds.
    const blocks = await inspector.query(`SELECT term_hash::text, size, postings FROM brain.posting_blocks WHERE tenant_id = $1`, [tenantId]);
    const postingsStored = {
      rows: blocks.rows
        .flatMap((block: { term_hash: string; size: number; postings: Buffer }): Array<{ term_hash: string; chunk_seq?: string; [column: string]: unknown }> => {
          const decoded = decodePostings(block.postings);
          if (decoded.seqs.length !== block.size) return [{ term_hash: block.term_hash, sizeStored: block.size, sizeHeld: decoded.seqs.length }];
          return decoded.seqs.map((seq, index) => ({ term_hash: block.term_hash, chunk_seq: String(seq), tf: decoded.frequencies[index], length: decoded.lengths[index] }));
        })
        .sort(byTermAndChunk),
    };
    const postingsDerived = await inspector.query(
      `SELECT u.term_hash::text, c.seq::text AS chunk_seq, u.tf, c.length FROM brain.chunks c
       CROSS JOIN LATERAL unnest(c.term_hashes, c.term_frequencies) AS u(term_hash, tf)
       WHERE c.tenant_id = $1`,
      [tenantId],
    );
    postingsDerived.rows.sort(byTermAndChunk);
    return {
      stored: { totals: stored.rows[0] ?? null, df: dfStored.rows, postings: postingsStored.rows },
      derived: { totals: stored.rows[0] ? derived.rows[0] : null, df: dfDerived.rows, postings: postingsDerived.rows },
    };
  }

  beforeAll(async () => {
    database = await createTestDatabase(ADMIN_URL, 'brain_test');
    inspector = new Client({ connectionString: database.url });
    await inspector.connect();
    brain = await startBrainService({ databaseUrl: database.url, bus: serviceBus, indexKeys: secret, keys: KEYS, mergeSweepIntervalMs: 250 });
    await serviceBus.start();
    await client.start();
  });

  afterAll(async () => {
    await client.close();
    await serviceBus.close();
    await brain?.stop();
    await inspector?.end();
    await database?.drop();
  });

  describe('documents', () => {
    it('ingests a document and shows it, without its text, to its tenant only', async () => {
      const tenant = randomUUID();
      const created = await ingest(tenant, { title: 'Notes', content: 'Some notes on waveguides.', source: 'https://example.org/notes', metadata: { team: 'rf' } });
      expect(created).toEqual({ id: expect.any(String), title: 'Notes', chunkCount: 1, createdAt: expect.any(String) });
      await expect(get(tenant, created.id)).resolves.toEqual({
        id: created.id,
        title: 'Notes',
        source: 'https://example.org/notes',
        metadata: { team: 'rf' },
        chunkCount: 1,
        contentBytes: 25,
        createdAt: created.createdAt,
      });
      for (const id of [created.id, randomUUID(), 'not-a-uuid', "'; DROP TABLE brain.documents; --"]) {
        expect((await domainErrorOf(get(randomUUID(), id))).code).toBe(ErrorCode.NotFound);
      }
    });

    it('lists documents newest first across pages, and a cursor never reaches another tenant', async () => {
      const tenant = randomUUID();
      const other = randomUUID();
      await ingest(other, { title: 'Other tenant', content: 'Not yours.' });
      const ids: string[] = [];
      for (let n = 0; n < 5; n++) ids.push((await ingest(tenant, { title: `Doc ${n}`, content: `Content ${n}.` })).id);

      const first = await list(tenant, { limit: '2' });
      expect(first.items.map((item) => item.title)).toEqual(['Doc 4', 'Doc 3']);
      expect(first.nextCursor).toEqual(expect.any(String));
      const second = await list(tenant, { limit: '2', cursor: first.nextCursor });
      const third = await list(tenant, { limit: '2', cursor: second.nextCursor });
      expect([...first.items, ...second.items, ...third.items].map((item) => item.id)).toEqual([...ids].reverse());
      expect(third.nextCursor).toBeNull();
      expect((await list(tenant)).items).toHaveLength(5);

      // The cursor positions the other tenant's own listing and shows nothing of ours.
      const foreign = await list(other, { cursor: first.nextCursor });
      expect(foreign.items.every((item) => !ids.includes(item.id))).toBe(true);
    });

    it('pages through a document’s passages in order, and shows them to its tenant only', async () => {
      const tenant = randomUUID();
      const paragraphs = Array.from({ length: 12 }, (_, n) => `Paragraph ${n} on waveguide number ${n}. `.repeat(12).trim());
      const created = await ingest(tenant, { title: 'Long notes', content: paragraphs.join('\n\n') });
      expect(created.chunkCount).toBeGreaterThan(3);

      const pages: Array<Page<PassageView>> = [await passages(tenant, { id: created.id, limit: 2 })];
      for (let cursor = pages[0]?.nextCursor; cursor; cursor = pages[pages.length - 1]?.nextCursor) pages.push(await passages(tenant, { id: created.id, limit: 2, cursor }));
      const all = pages.flatMap((page) => page.items);
      expect(all.map((passage) => passage.ordinal)).toEqual(Array.from({ length: created.chunkCount }, (_, n) => n));
      expect(pages.slice(0, -1).every((page) => page.items.length === 2)).toBe(true);
      // Every paragraph is in a passage, in the document's order.
      const text = all.map((passage) => passage.text).join('\n\n');
      const positions = paragraphs.map((paragraph) => text.indexOf(paragraph));
      expect(positions.every((position, n) => position >= 0 && (n === 0 || position > (positions[n - 1] ?? 0)))).toBe(true);

      for (const [who, id] of [
        [randomUUID(), created.id],
        [tenant, randomUUID()],
        [tenant, 'not-a-uuid'],
      ]) {
        expect(await domainErrorOf(passages(who ?? '', { id: id ?? '' }))).toMatchObject({ code: ErrorCode.NotFound });
      }
    });

    it('deletes a document with its chunks, index entries and share of the statistics, merged or still waiting', async () => {
      const tenant = randomUUID();
      await ingest(tenant, CORPUS[0]);
      const before = await statisticsOf(tenant);
      const doomed = await ingest(tenant, { title: 'Transient', content: 'A transistor and a superconductor walk into a waveguide. '.repeat(200) });
      expect(doomed.chunkCount).toBeGreaterThan(1);
      expect((await query(tenant, 'waveguide')).results.map((r) => r.documentId)).toContain(doomed.id);

      await expect(remove(tenant, doomed.id)).resolves.toEqual({ id: doomed.id });

      expect((await domainErrorOf(get(tenant, doomed.id))).code).toBe(ErrorCode.NotFound);
      expect((await query(tenant, 'waveguide')).results).toEqual([]);
      expect((await query(tenant, 'transistor')).results.map((r) => r.documentId)).not.toContain(doomed.id);
      const { rows } = await inspector.query(`SELECT count(*)::int AS n FROM brain.chunks WHERE document_id = $1`, [doomed.id]);
      expect(rows).toEqual([{ n: 0 }]);
      const after = await statisticsOf(tenant);
      expect(after).toEqual(before);
      expect(after.stored).toEqual(after.derived);
      expect((await domainErrorOf(remove(tenant, doomed.id))).code).toBe(ErrorCode.NotFound);

      // A document deleted before any merge took its chunks: they never reach a block.
      await inspector.query(`ALTER TABLE brain.posting_blocks ADD CONSTRAINT posting_blocks_refuse CHECK (false) NOT VALID`);
      let waiting: IngestedDocumentView;
      try {
        waiting = await ingest(tenant, { title: 'Short-lived', content: 'A waveguide and a klystron. '.repeat(300) });
        expect((await inspector.query(`SELECT count(*)::int AS n FROM brain.unmerged_chunks WHERE tenant_id = $1`, [tenant])).rows[0].n).toBe(waiting.chunkCount);
        expect((await query(tenant, 'klystron')).results.map((r) => r.documentId)).toContain(waiting.id);
        await expect(remove(tenant, waiting.id)).resolves.toEqual({ id: waiting.id });
      } finally {
        await inspector.query(`ALTER TABLE brain.posting_blocks DROP CONSTRAINT posting_blocks_refuse`);
      }
      expect((await query(tenant, 'klystron')).results).toEqual([]);
      expect(await statisticsOf(tenant)).toEqual(before);
    });

    it('refuses to delete another tenant’s document and leaves it intact', async () => {
      const owner = randomUUID();
      const { id } = await ingest(owner, CORPUS[1]);
      expect((await domainErrorOf(remove(randomUUID(), id))).code).toBe(ErrorCode.NotFound);
      await expect(get(owner, id)).resolves.toMatchObject({ id });
      expect((await query(owner, 'dielectric')).results.map((r) => r.documentId)).toEqual([id]);
    });

    it('indexes a document of the full 10 MiB and finds a word from its end', async () => {
      const tenant = randomUUID();
      const filler = 'Resonant cavities store electromagnetic energy at microwave frequencies. ';
      let content = filler.repeat(Math.floor(BRAIN_LIMITS.contentBytes / filler.length));
      const ending = ' The last paragraph mentions a magnetron.';
      content = content.slice(0, BRAIN_LIMITS.contentBytes - ending.length) + ending;
      expect(Buffer.byteLength(content)).toBe(BRAIN_LIMITS.contentBytes);
      const started = performance.now();
      const created = await ingest(tenant, { title: 'Ten mebibytes', content });
      const seconds = (performance.now() - started) / 1000;
      expect(created.chunkCount).toBeGreaterThan(5_000);
      const found = await query(tenant, 'magnetron', 3);
      expect(found.results).toHaveLength(1);
      expect(found.results[0]?.text).toContain('magnetron');
      process.stdout.write(`10 MiB document: ${created.chunkCount} chunks indexed in ${seconds.toFixed(1)} s\n`);
    }, 180_000);
  });

  describe('ranking', () => {
    it('ranks the passage about the query first and leaves out passages that match nothing', async () => {
      const tenant = randomUUID();
      const ids = await seed(tenant);
      const answer = await query(tenant, 'dielectric constant of liquids');
      expect(answer.results.map((r) => r.documentId)).toEqual([ids.get('Microwave dielectrics')]);
      expect(answer.results[0]).toMatchObject({ title: 'Microwave dielectrics', text: CORPUS[1]?.content, score: expect.any(Number) });

      const microwave = await query(tenant, 'microwave power');
      expect(microwave.results.map((r) => r.title)).toEqual(['Ferrite devices', 'Microwave dielectrics', 'Transistor amplifiers']);
      const scores = microwave.results.map((r) => r.score);
      expect([...scores].sort((a, b) => b - a)).toEqual(scores);
    });

    it("runs a query's statistics in one message, with the ranking's settings beside the tenant and the COMMIT: a query that matches nothing is one round trip", async () => {
      const tenant = randomUUID();
      await seed(tenant);
      // The transaction's opening with the tenant and the ranking's settings, inlined or prepared
      // (the statements of a transaction with settings are prepared under names of their own).
      const settings: Array<[string, string]> = [['app.tenant_id', tenant], ...Object.entries(RANKING_SETTINGS)];
      const escape = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
      const inlined = `SELECT ${settings.map(([name, value]) => escape(`set_config('${name}', '${value}', true)`)).join(', ')}`;
      const executed = `EXECUTE mission_[0-9a-f]{32}\\(${settings.map(([name, value]) => escape(`'${name}', '${value}'`)).join(', ')}\\)`;
      const opening = `START TRANSACTION;\\n(?:${inlined}|(?:PREPARE mission_[0-9a-f]{32} AS SELECT set_config[^;]*;\\n)?${executed})`;
      const withSettings = new RegExp(`^${opening}`);
      const sent = jest.spyOn(Client.prototype, 'query');
      // Messages are told apart by content: a merge of the seeded documents may run meanwhile (without these settings).
      const messages = (): string[] => sent.mock.calls.map(([text]) => String(text)).filter((text) => !isPreparationProbe(text) && withSettings.test(text));
      try {
        for (let round = 0; round < 3; round++) {
          sent.mockClear();
          expect((await query(tenant, 'microwave power')).results.length).toBeGreaterThan(0);
          // The statistics (a statement of their own, with the COMMIT), then the ranking in a
          // transaction of its own with the same settings, opened with its blocks statement.
          const [statistics, ranking, ...more] = messages();
          expect(more).toEqual([]);
          expect(statistics).toMatch(new RegExp(`^${opening};\\n${sentStatement('SELECT s\\.chunk_count')}[^;]*;\\nCOMMIT$`, 's'));
          expect(ranking).toMatch(new RegExp(`^${opening};\\n${sentStatement('SELECT [^;]*encode\\(postings, ')}`, 's'));
          expect(ranking).not.toMatch(/COMMIT$/);

          sent.mockClear();
          expect((await query(tenant, 'zymurgy')).results).toEqual([]);
          expect(messages()).toEqual([expect.stringMatching(new RegExp(`^${opening};\\n${sentStatement('SELECT s\\.chunk_count')}[^;]*;\\nCOMMIT$`, 's'))]);
        }
      } finally {
        sent.mockRestore();
      }
    });

    it("gives a merge's and a deletion's planner settings with the transaction's opening, never by a statement inside it", async () => {
      const tenant = randomUUID();
      const sent = jest.spyOn(Client.prototype, 'query');
      try {
        const doc = await ingest(tenant, { title: 'Settings', content: 'A klystron feeds a waveguide. '.repeat(100) });
        await merged(tenant);
        await expect(remove(tenant, doc.id)).resolves.toEqual({ id: doc.id });
        const texts = sent.mock.calls.map(([text]) => String(text)).filter((text) => !isPreparationProbe(text) && text.includes(tenant));
        // Inlined: set_config('enable_seqscan', 'off', true); prepared: the pair among the EXECUTE's literals.
        const setting = /set_config\('enable_seqscan', 'off', true\)|'enable_seqscan', 'off'/;
        const opening = new RegExp(
          `^START TRANSACTION;\\n(?:SELECT set_config\\('app\\.tenant_id', '${tenant}', true\\)|(?:PREPARE mission_[0-9a-f]{32} AS SELECT set_config[^;]*;\\n)?EXECUTE mission_[0-9a-f]{32}\\('app\\.tenant_id', '${tenant}')[^;]*(?:${setting.source})[^;]*(?:;\\n|$)`,
        );
        const withSetting = texts.filter((text) => setting.test(text));
        // At least the merge (with work_mem and its statement timeout) and the deletion.
        expect(withSetting.filter((text) => /'statement_timeout', '120s'|set_config\('statement_timeout', '120s', true\)/.test(text)).length).toBeGreaterThanOrEqual(1);
        expect(withSetting.length).toBeGreaterThanOrEqual(2);
        for (const text of withSetting) expect({ text, inOpening: opening.test(text) }).toEqual({ text, inOpening: true });
      } finally {
        sent.mockRestore();
      }
    });

    it('finds a passage by its document title', async () => {
      const tenant = randomUUID();
      const ids = await seed(tenant);
      expect((await query(tenant, 'superconductivity')).results.map((r) => r.documentId)).toEqual([ids.get('Superconductivity')]);
    });

    it('sums each posting as the SQL of a pruned ranking rounds it, exact halves included (half to even)', async () => {
      // The service sums the read lists, SQL completes a pruned ranking's candidates: the same
      // integer for the same posting, or the two would rank near-ties differently.
      const check = async (normalisation: { constant: number; perTerm: number }, cases: Array<{ weight: number; tf: number; length: number }>): Promise<number[]> => {
        const { rows } = await inspector.query(
          `SELECT ${CONTRIBUTION('x.w', 'x.tf', 'x.len')} AS units
           FROM unnest($1::float8[], $2::int[], $3::int[]) WITH ORDINALITY AS x(w, tf, len, n) ORDER BY x.n`,
          [cases.map((x) => x.weight), cases.map((x) => x.tf), cases.map((x) => x.length), normalisation.constant, normalisation.perTerm],
        );
        const sql = rows.map((row) => Number(row.units));
        expect(sql).toEqual(cases.map((x) => contribution(x.weight, x.tf, x.length, normalisation)));
        return sql;
      };
      // Exact halves once multiplied back (0.5, 2.5 and 6.5 are; 1.5e-9 · 1e9 is not 1.5).
      expect(
        await check(
          { constant: 0, perTerm: 0 },
          [0.5, 2.5, 6.5].map((units) => ({ weight: units * 1e-9, tf: 1, length: 0 })),
        ),
      ).toEqual([0, 2, 6]);
      const normalisations = fc.sample(fc.record({ constant: fc.double({ min: 0, max: 1.2, noNaN: true }), perTerm: fc.double({ min: 0, max: 0.1, noNaN: true }) }), {
        numRuns: 10,
        seed: 20261127,
      });
      for (const normalisation of normalisations) {
        await check(
          normalisation,
          fc.sample(fc.record({ weight: fc.double({ min: 0.01, max: 60, noNaN: true }), tf: fc.integer({ min: 1, max: 40 }), length: fc.integer({ min: 0, max: 2_000 }) }), {
            numRuns: 50,
            seed: 7,
          }),
        );
      }
    });

    it('refuses a query whose words more passages hold than one query may rank, saying so', async () => {
      const tenant = randomUUID();
      await seed(tenant);
      const dataSource = await openBrainDatabase(database.url);
      try {
        const bounded = new BrainService(dataSource, new BrainRepository(new RecordCipher(BRAIN_SCHEMA, KEYS), DEFAULT_PRUNING, 3), new DerivedTenantIndexKeys(secret));
        await expect(as(tenant, () => bounded.search('microwave power transistor', 10))).rejects.toMatchObject({
          code: ErrorCode.ValidationFailed,
          message: expect.stringMatching(/number 5, more than the 3 one query may rank/),
        });
        // Below the bound the same service ranks.
        expect((await as(tenant, () => bounded.search('transistor', 10))).length).toBeGreaterThan(0);
      } finally {
        await dataSource.destroy();
      }
    });

    it('scores as the in-memory BM25 reference over the same chunks', async () => {
      const tenant = randomUUID();
      await seed(tenant);
      const chunks = CORPUS.flatMap((document) =>
        chunkText(document.content).map((text) => {
          const terms = termFrequencies([...analyze(text), ...analyze(document.title)]);
          return { id: text, terms, length: [...terms.values()].reduce((a, b) => a + b, 0) };
        }),
      );
      for (const q of ['microwave power', 'transistor transistor amplifier', 'digital computer memory', 'phase of radio beams']) {
        const expected = rankInMemory(termFrequencies(analyze(q)), chunks);
        const actual = (await query(tenant, q, 50)).results;
        expect(actual.map((r) => r.text)).toEqual(expected.map((r) => r.id));
        // The database rounds each term's contribution to 1e-9 (order-independent sums).
        actual.forEach((result, index) => expect(result.score).toBeCloseTo(expected[index]?.score ?? NaN, 8));
      }
    });

    it('ranks the same, score for score, while chunks wait for a merge and once they are merged; a failed merge is made up later', async () => {
      const tenant = randomUUID();
      await seed(tenant);
      await merged(tenant);
      const queries = ['microwave power', 'transistor amplifier', 'digital computer memory', 'phase radio beam', 'quasiparticle waveguide'];
      const rankings = async (): Promise<unknown[]> => Promise.all(queries.map(async (q) => (await query(tenant, q, 50)).results.map((r) => [r.chunkId, r.score])));
      const extra = [
        { title: 'Waveguides', content: 'A waveguide carries microwave power between a klystron and an antenna. '.repeat(40) },
        { title: 'Quasiparticles', content: 'A quasiparticle in a superconductor behaves like an electron with another mass. '.repeat(30) },
      ];
      // Merges refused: the new documents' chunks stay waiting, and are ranked from there.
      await inspector.query(`ALTER TABLE brain.posting_blocks ADD CONSTRAINT posting_blocks_refuse CHECK (false) NOT VALID`);
      let waiting: unknown[];
      try {
        for (const document of extra) await ingest(tenant, document);
        await new Promise((resolve) => setTimeout(resolve, 300));
        const { rows } = await inspector.query(`SELECT count(*)::int AS n FROM brain.unmerged_chunks WHERE tenant_id = $1`, [tenant]);
        expect(rows[0].n).toBeGreaterThan(2);
        waiting = await rankings();
      } finally {
        await inspector.query(`ALTER TABLE brain.posting_blocks DROP CONSTRAINT posting_blocks_refuse`);
      }
      // The periodic sweep merges them without another ingestion.
      await merged(tenant);
      const mergedRankings = await rankings();
      expect(mergedRankings).toEqual(waiting);
      expect((mergedRankings[4] as unknown[]).length).toBeGreaterThan(0);
      const { stored, derived } = await statisticsOf(tenant);
      expect(stored).toEqual(derived);
    });

    it('ranks a query of common and rarer words the same whether the common words\u2019 lists are pruned or read whole', async () => {
      const tenant = randomUUID();
      // A Zipf-like vocabulary, so that some words are in most chunks and others in few.
      // Uniform draws from fast-check's seeded generator (without its bias towards edge values).
      const draws = fc.sample(fc.noBias(fc.integer({ min: 0, max: 0x7fffffff })), { seed: 20261126, numRuns: 60_000 });
      let drawn = 0;
      const random = (): number => draws[drawn++ % draws.length] / 0x80000000;
      const vocabulary = Array.from({ length: 400 }, (_, rank) => `w${rank.toString(36)}x${'abcdefghij'[rank % 10]}`);
      const cumulative: number[] = [];
      vocabulary.reduce((sum, _word, rank) => (cumulative[rank] = sum + 1 / (rank + 2)), 0);
      const draw = (): string => {
        const target = random() * cumulative[cumulative.length - 1];
        return vocabulary[cumulative.findIndex((value) => value >= target)];
      };
      for (let d = 0; d < 40; d++) {
        const sentences = Array.from({ length: 20 + Math.floor(random() * 40) }, () => `${Array.from({ length: 6 + Math.floor(random() * 10) }, draw).join(' ')}.`);
        await ingest(tenant, { title: `Document ${d}`, content: sentences.join(' ') });
      }
      const dataSource = await openBrainDatabase(database.url);
      try {
        const keys = new DerivedTenantIndexKeys(secret);
        const pruningRepository = new BrainRepository(new RecordCipher(BRAIN_SCHEMA, KEYS), { minSkippedPostings: 0, maxBoundShare: 0.6, probeCost: 0 });
        const pruning = new BrainService(dataSource, pruningRepository, keys);
        const inFull = new BrainService(
          dataSource,
          new BrainRepository(new RecordCipher(BRAIN_SCHEMA, KEYS), { minSkippedPostings: Number.POSITIVE_INFINITY, maxBoundShare: 0, probeCost: 0 }),
          keys,
        );
        await fc.assert(
          fc.asyncProperty(
            fc.integer({ min: 0, max: 9 }),
            fc.array(fc.integer({ min: 10, max: vocabulary.length - 1 }), { minLength: 1, maxLength: 3 }),
            fc.constantFrom(1, 3, 5, 10, 20),
            async (common, others, k) => {
              const q = [vocabulary[common], ...others.map((index) => vocabulary[index])].join(' ');
              const [pruned, full] = await as(tenant, () => Promise.all([pruning.search(q, k), inFull.search(q, k)]));
              // Score for score and tie for tie.
              expect(pruned.map((r) => [r.chunkId, r.score])).toEqual(full.map((r) => [r.chunkId, r.score]));
            },
          ),
          { numRuns: 150 },
        );
        // Both ways were taken: rankings proven whole from the candidates, and tries that fell back.
        expect(pruningRepository.pruningOutcomes.pruned).toBeGreaterThan(20);
        expect(pruningRepository.pruningOutcomes.rankedInFull).toBeGreaterThan(0);
      } finally {
        await dataSource.destroy();
      }
    });

    it('answers hostile queries with a ranking, never an error', async () => {
      const tenant = randomUUID();
      await seed(tenant);
      const hostile = [
        "'; DROP TABLE brain.postings; --",
        'transistor OR 1=1 AND NOT (microwave) | & ! * ? ~ ^',
        'x'.repeat(10_000),
        Array.from({ length: 2_000 }, (_, n) => `w${n}`)
          .join(' ')
          .slice(0, 10_000),
        '\ud800\udc00\ud800 🧪 东京 مرحبا \u202e\u0000',
        'the of and a an',
        '%00%27%22',
      ];
      for (const q of hostile) {
        const answer = await query(tenant, q);
        expect(Array.isArray(answer.results)).toBe(true);
      }
      expect((await query(tenant, 'transistor OR 1=1 AND NOT (microwave)')).results.length).toBeGreaterThan(0);
    });
  });

  describe('merges', () => {
    const blocksOf = async (tenantId: string): Promise<Array<{ block: string; size: number }>> =>
      (
        await inspector.query(
          `SELECT b.block::text, b.size FROM brain.posting_blocks b
           WHERE b.tenant_id = $1 ORDER BY b.size DESC, b.block LIMIT 5`,
          [tenantId],
        )
      ).rows;

    it('stores and merges passages without index terms beside one with them, each with its own terms', async () => {
      const tenant = randomUUID();
      const stopWords = 'the of and to a in is that it was for on are as with '.repeat(40).trim();
      const document = await ingest(tenant, { title: 'The Of And', content: `${stopWords}\n\nKlystrons amplify microwave signals in radar transmitters.` });
      expect(document.chunkCount).toBeGreaterThanOrEqual(2);
      const { rows } = await inspector.query(
        `SELECT ordinal, cardinality(term_hashes) AS terms, cardinality(term_frequencies) AS frequencies FROM brain.chunks WHERE tenant_id = $1 ORDER BY ordinal`,
        [tenant],
      );
      expect(rows.slice(0, -1).every((row) => row.terms === 0 && row.frequencies === 0)).toBe(true);
      expect(rows[rows.length - 1]).toEqual({ ordinal: rows.length - 1, terms: 6, frequencies: 6 });
      const { stored, derived } = await statisticsOf(tenant);
      expect(stored).toEqual(derived);
      expect((await query(tenant, 'klystrons radar')).results.map((result) => result.text)).toEqual(['Klystrons amplify microwave signals in radar transmitters.']);
    });

    it('writes the blocks of a bulk merge of many thousand terms in several statements, each block as its chunks hold it', async () => {
      const tenant = randomUUID();
      // About 48,000 distinct words in some 300 passages: one merge of the bulk kind, ten statements of new blocks.
      const words = Array.from({ length: 48_000 }, (_, n) => `q${n.toString(36)}7`);
      const paragraphs: string[] = [];
      for (let at = 0; at < words.length; at += 20) paragraphs.push(`${words.slice(at, at + 20).join(' ')}.`);
      const document = await ingest(tenant, { title: 'Many words', content: paragraphs.join('\n\n') });
      expect(document.chunkCount).toBeGreaterThan(256);
      await merged(tenant);
      const { rows } = await inspector.query(`SELECT count(*)::int AS blocks FROM brain.posting_blocks WHERE tenant_id = $1`, [tenant]);
      expect(rows[0].blocks).toBeGreaterThan(45_000);
      const { stored, derived } = await statisticsOf(tenant);
      expect((stored as { postings: unknown[] }).postings.length).toBeGreaterThan(45_000);
      expect(stored).toEqual(derived);
      const last = await query(tenant, words[words.length - 1] as string, 3);
      expect(last.results).toHaveLength(1);
      expect(last.results[0]?.text).toContain(words[words.length - 1]);
    }, 60_000);

    it('appends documents merged one at a time to the newest small block of each term', async () => {
      const tenant = randomUUID();
      const notes: IngestedDocumentView[] = [];
      for (let n = 0; n < 6; n++) {
        notes.push(await ingest(tenant, { title: `Note ${n}`, content: `Klystron amplifiers drive the radar, note ${n}.` }));
        await merged(tenant);
      }
      // "klystron" is in every chunk: one block of six, not six blocks of one.
      const { rows } = await inspector.query(
        `SELECT count(*)::int AS blocks, max(size)::int AS largest FROM brain.posting_blocks WHERE tenant_id = $1 GROUP BY term_hash ORDER BY 2 DESC LIMIT 1`,
        [tenant],
      );
      expect(rows).toEqual([{ blocks: 1, largest: 6 }]);
      const { stored, derived } = await statisticsOf(tenant);
      expect(stored).toEqual(derived);
      expect((await query(tenant, 'klystron')).results).toHaveLength(6);
      // One from the middle of the block's six segments is found in that block by its range, and taken out of it.
      await remove(tenant, notes[2]?.id ?? '');
      const afterMiddle = await statisticsOf(tenant);
      expect(afterMiddle.stored).toEqual(afterMiddle.derived);
      expect((await query(tenant, 'klystron')).results).toHaveLength(5);
      // So is the last one appended (the block is one segment now).
      await remove(tenant, notes[5]?.id ?? '');
      const after = await statisticsOf(tenant);
      expect(after.stored).toEqual(after.derived);
      expect((await query(tenant, 'klystron')).results.map((result) => result.documentId).sort()).toEqual([notes[0], notes[1], notes[3], notes[4]].map((note) => note?.id).sort());
    });

    it('takes a deleted document out of the blocks it shares with another, and keeps the other', async () => {
      const tenant = randomUUID();
      await inspector.query(`ALTER TABLE brain.posting_blocks ADD CONSTRAINT posting_blocks_wait CHECK (false) NOT VALID`);
      let kept: IngestedDocumentView;
      let doomed: IngestedDocumentView;
      try {
        kept = await ingest(tenant, { title: 'Magnetrons', content: 'A magnetron oscillates at microwave frequencies in a radar. '.repeat(60) });
        doomed = await ingest(tenant, { title: 'Klystrons', content: 'A klystron amplifies microwave frequencies in a radar. '.repeat(60) });
      } finally {
        await inspector.query(`ALTER TABLE brain.posting_blocks DROP CONSTRAINT posting_blocks_wait`);
      }
      await merged(tenant);
      // One merge took both: the common words' blocks hold chunks of both documents.
      expect((await blocksOf(tenant))[0]?.size).toBe(kept.chunkCount + doomed.chunkCount);

      await expect(remove(tenant, doomed.id)).resolves.toEqual({ id: doomed.id });
      expect((await blocksOf(tenant))[0]?.size).toBe(kept.chunkCount);
      const { stored, derived } = await statisticsOf(tenant);
      expect(stored).toEqual(derived);
      expect((await query(tenant, 'klystron')).results).toEqual([]);
      expect(new Set((await query(tenant, 'microwave radar', 50)).results.map((r) => r.documentId))).toEqual(new Set([kept.id]));
    });

    it('leaves a tenant to the process holding its merge lock, and merges what is left once it is free', async () => {
      const tenant = randomUUID();
      const holder = new Client({ connectionString: database.url });
      await holder.connect();
      try {
        await holder.query('BEGIN');
        await holder.query(`SELECT pg_advisory_xact_lock(hashtextextended('brain.merge:' || $1::text, 0))`, [tenant]);
        const { chunkCount } = await ingest(tenant, { title: 'Held', content: 'Traveling wave tubes amplify microwave signals. '.repeat(40) });
        // The merges it started (and the sweeps) try the lock and leave: none waits for it, holding a connection.
        for (let look = 0; look < 6; look++) {
          await new Promise((resolve) => setTimeout(resolve, 100));
          expect((await inspector.query(`SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`)).rows[0].n).toBe(0);
        }
        expect((await inspector.query(`SELECT count(*)::int AS n FROM brain.unmerged_chunks WHERE tenant_id = $1`, [tenant])).rows[0].n).toBe(chunkCount);
        expect((await query(tenant, 'traveling wave')).results.length).toBeGreaterThan(0);
        await holder.query('COMMIT');
      } finally {
        await holder.end();
      }
      await merged(tenant);
      const { stored, derived } = await statisticsOf(tenant);
      expect(stored).toEqual(derived);
    });

    it('counts every chunk once when the merges of two services of one tenant overlap', async () => {
      const tenant = randomUUID();
      await inspector.query(`ALTER TABLE brain.posting_blocks ADD CONSTRAINT posting_blocks_wait CHECK (false) NOT VALID`);
      try {
        await Promise.all(Array.from({ length: 8 }, (_, n) => ingest(tenant, { title: `Batch ${n}`, content: `${CORPUS[n % CORPUS.length]?.content} `.repeat(20 + n) })));
      } finally {
        await inspector.query(`ALTER TABLE brain.posting_blocks DROP CONSTRAINT posting_blocks_wait`);
      }
      const dataSource = await openBrainDatabase(database.url);
      try {
        const other = new BrainService(dataSource, new BrainRepository(new RecordCipher(BRAIN_SCHEMA, KEYS)), new DerivedTenantIndexKeys(secret));
        await Promise.all([other.sweepUnmerged(), other.sweepUnmerged()]);
        await merged(tenant);
        await other.stopMerging();
      } finally {
        await dataSource.destroy();
      }
      const { stored, derived } = await statisticsOf(tenant);
      expect(stored).toEqual(derived);
    });
  });

  describe('tenant isolation', () => {
    it('never returns another tenant’s passages, and another tenant’s documents never change our scores', async () => {
      const tenantA = randomUUID();
      const tenantB = randomUUID();
      await seed(tenantA);
      const before = await query(tenantA, 'microwave power transistor', 50);

      // B floods its own index with the same words: our document frequencies and lengths must not move.
      for (let n = 0; n < 20; n++) await ingest(tenantB, { title: `B ${n}`, content: 'microwave power transistor '.repeat(n + 1) });
      const after = await query(tenantA, 'microwave power transistor', 50);
      expect(after).toEqual(before);

      const fromB = await query(tenantB, 'microwave power transistor', 50);
      const aDocuments = new Set(before.results.map((r) => r.documentId));
      expect(fromB.results.some((r) => aDocuments.has(r.documentId))).toBe(false);
      expect((await query(randomUUID(), 'microwave')).results).toEqual([]);
    });

    it('keeps statistics per tenant that always equal what the chunks hold, under concurrent ingestion and merges', async () => {
      const tenant = randomUUID();
      await Promise.all(Array.from({ length: 12 }, (_, n) => ingest(tenant, { title: `Concurrent ${n}`, content: `${CORPUS[n % CORPUS.length]?.content} Extra word${n % 3}.` })));
      const { stored, derived } = await statisticsOf(tenant);
      expect(stored).toEqual(derived);
      expect((stored as { totals: { document_count: number } }).totals.document_count).toBe(12);
    });
  });

  describe('blind index', () => {
    it('stores terms only as keyed hashes that differ between tenants', async () => {
      const [tenantA, tenantB] = [randomUUID(), randomUUID()];
      await ingest(tenantA, { title: 'Canary', content: 'The word xylophonic appears here.' });
      await ingest(tenantB, { title: 'Canary', content: 'The word xylophonic appears here.' });
      const columns = await inspector.query(
        `SELECT table_name, column_name, data_type FROM information_schema.columns
         WHERE table_schema = 'brain' AND table_name IN ('posting_blocks', 'unmerged_chunks') ORDER BY table_name, ordinal_position`,
      );
      expect(columns.rows.filter((c) => c.data_type === 'text')).toEqual([]);
      const hashesOf = async (tenantId: string): Promise<string[]> =>
        (await inspector.query(`SELECT DISTINCT term_hash::text FROM brain.posting_blocks WHERE tenant_id = $1 ORDER BY term_hash`, [tenantId])).rows.map((row) => row.term_hash);
      await Promise.all([merged(tenantA), merged(tenantB)]);
      const [hashesA, hashesB] = [await hashesOf(tenantA), await hashesOf(tenantB)];
      expect(hashesA).toHaveLength(hashesB.length);
      expect(hashesA.filter((hash) => hashesB.includes(hash))).toEqual([]);
      expect((await query(tenantA, 'xylophonic')).results).toHaveLength(1);
    });

    it('refuses to rank with another key instead of silently finding nothing', async () => {
      const tenant = randomUUID();
      await ingest(tenant, CORPUS[2]);
      const reader = await openBrainReader({ databaseUrl: database.url, indexKeys: randomBytes(32), keys: KEYS });
      try {
        await expect(as(tenant, () => reader.search('ferrite', 5))).rejects.toThrow(/another blind-index key/);
      } finally {
        await reader.close();
      }
      const sameKey = await openBrainReader({ databaseUrl: database.url, indexKeys: secret, keys: KEYS });
      try {
        await expect(as(tenant, () => sameKey.search('ferrite', 500))).resolves.toHaveLength(1);
      } finally {
        await sameKey.close();
      }
    });
  });

  describe('transactions', () => {
    it('stores nothing of a document whose index cannot be written', async () => {
      const tenant = randomUUID();
      await ingest(tenant, CORPUS[3]);
      const before = await statisticsOf(tenant);
      await inspector.query(`ALTER TABLE brain.unmerged_chunks ADD CONSTRAINT unmerged_chunks_refuse CHECK (false) NOT VALID`);
      try {
        const error = await domainErrorOf(ingest(tenant, { title: 'Doomed', content: 'A brand new word: quasiparticle.' }));
        expect(error.code).toBe(ErrorCode.Internal);
      } finally {
        await inspector.query(`ALTER TABLE brain.unmerged_chunks DROP CONSTRAINT unmerged_chunks_refuse`);
      }
      const { rows } = await inspector.query(`SELECT count(*)::int AS n FROM brain.documents WHERE tenant_id = $1`, [tenant]);
      expect(rows).toEqual([{ n: 1 }]);
      expect(await statisticsOf(tenant)).toEqual(before);
      expect((await query(tenant, 'quasiparticle')).results).toEqual([]);
    });

    it('keeps a document whole when its deletion fails half-way', async () => {
      const tenant = randomUUID();
      const { id } = await ingest(tenant, CORPUS[4]);
      const before = await statisticsOf(tenant);
      await inspector.query(`ALTER TABLE brain.tenant_stats ADD CONSTRAINT tenant_stats_refuses CHECK (false) NOT VALID`);
      try {
        expect((await domainErrorOf(remove(tenant, id))).code).toBe(ErrorCode.Internal);
      } finally {
        await inspector.query(`ALTER TABLE brain.tenant_stats DROP CONSTRAINT tenant_stats_refuses`);
      }
      await expect(get(tenant, id)).resolves.toMatchObject({ id });
      expect(await statisticsOf(tenant)).toEqual(before);
      expect((await query(tenant, 'antenna')).results.map((r) => r.documentId)).toEqual([id]);
    });
  });

  describe('row-level security', () => {
    /** Runs `sql` as brain-service's role (RLS applies), optionally inside a tenant's transaction. */
    async function asServiceRole(sql: string, tenantId?: string): Promise<number> {
      await inspector.query('BEGIN');
      try {
        await inspector.query('SET LOCAL ROLE brain_service');
        if (tenantId) await inspector.query(`SELECT set_config('app.tenant_id', $1, true)`, [tenantId]);
        const { rows } = await inspector.query(sql);
        return rows[0].n as number;
      } finally {
        await inspector.query('ROLLBACK');
      }
    }

    it('shows the service role nothing without a tenant, and only the tenant’s own rows with one', async () => {
      const [tenantA, tenantB] = [randomUUID(), randomUUID()];
      await ingest(tenantA, { title: 'Alpha', content: 'klystron amplifiers for radar' });
      await ingest(tenantB, { title: 'Beta', content: 'magnetron oscillators for radar' });
      await Promise.all([merged(tenantA), merged(tenantB)]);
      for (const table of ['documents', 'chunks', 'posting_blocks', 'tenant_stats']) {
        expect(await asServiceRole(`SELECT count(*)::int AS n FROM brain.${table}`)).toBe(0);
        const own = await asServiceRole(`SELECT count(*)::int AS n FROM brain.${table}`, tenantA);
        const foreign = await asServiceRole(`SELECT count(*)::int AS n FROM brain.${table} WHERE tenant_id <> '${tenantA}'`, tenantA);
        expect({ table, own: own > 0, foreign }).toEqual({ table, own: true, foreign: 0 });
      }
    });
  });

  describe('merges gathered for a while', () => {
    /** Records each merge a service runs: when it began, what it was allowed and what it took. */
    class CountingRepository extends BrainRepository {
      readonly merges: Array<{ at: number; maxChunks: number | undefined; merged: number | null }> = [];
      /** Chunks the merges found kept by the service (`known`) and those they had to read back (`read`). */
      readonly inputs = { known: 0, read: 0 };

      override async mergeUnmerged(...args: Parameters<BrainRepository['mergeUnmerged']>): Promise<number | null> {
        const at = Date.now();
        const [manager, tenantId, maxChunks, inputs] = args;
        const counted = {
          take: (tenant: string, seq: number, id: string) => {
            const chunk = inputs?.take(tenant, seq, id);
            if (chunk) this.inputs.known++;
            else this.inputs.read++;
            return chunk;
          },
        };
        const merged = await super.mergeUnmerged(manager, tenantId, maxChunks, counted);
        this.merges.push({ at, maxChunks, merged });
        return merged;
      }
    }

    // A database of their own: the suite's service sweeps its own and would merge these chunks first.
    let own: TestDatabase;
    let dataSource: DataSource;
    let ownInspector: Client;
    const services: BrainService[] = [];

    beforeAll(async () => {
      own = await createTestDatabase(ADMIN_URL, 'brain_gather_test');
      dataSource = await openBrainDatabase(own.url);
      ownInspector = new Client({ connectionString: own.url });
      await ownInspector.connect();
    });

    afterAll(async () => {
      await Promise.all(services.map((service) => service.stopMerging()));
      await ownInspector?.end();
      await dataSource?.destroy();
      await own?.drop();
    });

    function serviceWith(settings: { mergeGatherMs: number; mergeBatchChunks?: number; waitingTermsMaxBytes?: number }): { brain: BrainService; repository: CountingRepository } {
      const repository = new CountingRepository(new RecordCipher(BRAIN_SCHEMA, KEYS));
      const brain = new BrainService(dataSource, repository, new DerivedTenantIndexKeys(secret), { bm25: BM25_DEFAULTS, chunking: DEFAULT_CHUNKING, ...settings });
      services.push(brain);
      return { brain, repository };
    }

    const waiting = async (tenantId: string): Promise<number> =>
      (await ownInspector.query(`SELECT count(*)::int AS n FROM brain.unmerged_chunks WHERE tenant_id = $1`, [tenantId])).rows[0].n;

    /**
     * The repository's next merge, its batch taken, held until `release()`: documents stored
     * meanwhile arrive while a merge runs (the tenant is loading). `restore()` releases it and
     * puts the repository back.
     */
    function holdingFirstMerge(repository: CountingRepository): { firstTaken: Promise<void>; release(): void; restore(): void } {
      let release: () => void = () => undefined;
      const held = new Promise<void>((resolve) => (release = resolve));
      let taken: () => void = () => undefined;
      const firstTaken = new Promise<void>((resolve) => (taken = resolve));
      const merge = repository.mergeUnmerged.bind(repository);
      const spy = jest.spyOn(repository, 'mergeUnmerged').mockImplementationOnce(async (...args) => {
        const merged = await merge(...args);
        taken();
        await held;
        return merged;
      });
      return {
        firstTaken,
        release,
        restore: () => {
          spy.mockRestore();
          release();
        },
      };
    }

    async function drained(tenantId: string): Promise<void> {
      const deadline = Date.now() + 20_000;
      while ((await waiting(tenantId)) > 0) {
        if (Date.now() > deadline) throw new Error(`chunks of tenant ${tenantId} still wait for a merge`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    }

    /** Stores, as `tenant`, a one-sentence document titled `title` about `about`. */
    const ingesterFor =
      (brain: BrainService, tenant: string, about: string) =>
      (title: string): Promise<IngestedDocumentView> =>
        runWithTenant({ tenantId: tenant }, () => brain.ingest({ title, content: `${title}: ${about}.` }));

    /** `count` documents about 10 ms apart (each ingestion's own time on top), the held first merge released halfway. */
    async function fastLoad(ingest: (title: string) => Promise<IngestedDocumentView>, count: number, release: () => void): Promise<void> {
      for (let n = 0; n < count; n++) {
        if (n === count / 2) release();
        await new Promise((resolve) => setTimeout(resolve, 10));
        await ingest(`Fast ${n}`);
      }
    }

    it('merges the documents stored within the gathering time together, and a lone document once that time has passed', async () => {
      const tenant = randomUUID();
      const { brain, repository } = serviceWith({ mergeGatherMs: 1_500 });
      const started = Date.now();
      const stored = await Promise.all(CORPUS.slice(0, 3).map((document) => runWithTenant({ tenantId: tenant }, () => brain.ingest(document))));
      await drained(tenant);
      const chunks = stored.reduce((sum, document) => sum + document.chunkCount, 0);
      expect(repository.merges.map(({ merged }) => merged)).toEqual([chunks]);
      expect(repository.merges[0]?.at).toBeGreaterThanOrEqual(started + 1_500);

      const lone = Date.now();
      const last = await runWithTenant({ tenantId: tenant }, () => brain.ingest({ title: 'Later', content: 'A klystron amplifies microwaves.' }));
      await drained(tenant);
      expect(repository.merges.map(({ merged }) => merged)).toEqual([chunks, last.chunkCount]);
      expect(repository.merges[1]?.at).toBeGreaterThanOrEqual(lone + 1_500);
      const { stored: statistics, derived } = await (async () => {
        const df = await ownInspector.query(`SELECT term_hash::text, sum(size)::int AS df FROM brain.posting_blocks WHERE tenant_id = $1 GROUP BY term_hash ORDER BY term_hash`, [
          tenant,
        ]);
        const counted = await ownInspector.query(
          `SELECT u.term_hash::text, count(*)::int AS df FROM brain.chunks c CROSS JOIN LATERAL unnest(c.term_hashes) AS u(term_hash) WHERE c.tenant_id = $1 GROUP BY 1 ORDER BY 1`,
          [tenant],
        );
        return { stored: df.rows, derived: counted.rows };
      })();
      expect(statistics).toEqual(derived);
    });

    it('starts at once when a full batch has gathered, takes it a batch at a time, and leaves a smaller one gathering until a sweep', async () => {
      const tenant = randomUUID();
      const { brain, repository } = serviceWith({ mergeGatherMs: 600_000, mergeBatchChunks: 4 });
      const paragraph = (n: number): string => `Paragraph ${n} on klystrons. ${'Microwave tubes amplify the signals of radar transmitters. '.repeat(16)}`;
      const large = await runWithTenant({ tenantId: tenant }, () => brain.ingest({ title: 'Tubes', content: Array.from({ length: 10 }, (_, n) => paragraph(n)).join('\n\n') }));
      expect(large.chunkCount).toBeGreaterThan(8);
      await drained(tenant);
      const taken = repository.merges.map(({ merged }) => merged);
      expect(repository.merges.every(({ maxChunks }) => maxChunks === 4)).toBe(true);
      expect(taken.reduce<number>((sum, merged) => sum + (merged ?? 0), 0)).toBe(large.chunkCount);
      expect(taken.slice(0, -1).every((merged) => merged === 4)).toBe(true);

      // Fewer than a batch: it gathers (ten minutes here), searchable meanwhile.
      await runWithTenant({ tenantId: tenant }, () => brain.ingest({ title: 'Note', content: 'A magnetron oscillates.' }));
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(repository.merges).toHaveLength(taken.length);
      expect(await waiting(tenant)).toBe(1);
      expect((await runWithTenant({ tenantId: tenant }, () => brain.search('magnetron', 5))).map((result) => result.title)).toEqual(['Note']);
      await brain.stopMerging();
      expect(await waiting(tenant)).toBe(1);
      // A sweep (the next start's, here another service's) merges what was left at once, without gathering.
      const next = serviceWith({ mergeGatherMs: 600_000, mergeBatchChunks: 4 });
      await expect(next.brain.sweepUnmerged()).resolves.toBeGreaterThanOrEqual(1);
      await drained(tenant);
      expect(next.repository.merges.map(({ merged }) => merged)).toEqual([1]);
    });

    it('merges the chunks it stored from the terms it wrote, reads back only what it does not hold, and indexes the same either way', async () => {
      const document = {
        title: 'Tubes',
        content: Array.from({ length: 6 }, (_, n) => `Paragraph ${n}: klystrons and magnetrons amplify microwave signals. `.repeat(12)).join('\n\n'),
      };
      const blocksAndStatistics = async (tenantId: string): Promise<{ sizes: number[]; stored: unknown; derived: unknown }> => {
        const blocks = await ownInspector.query(`SELECT size FROM brain.posting_blocks WHERE tenant_id = $1 ORDER BY size, term_hash`, [tenantId]);
        const df = await ownInspector.query(`SELECT term_hash::text, sum(size)::int AS df FROM brain.posting_blocks WHERE tenant_id = $1 GROUP BY 1 ORDER BY 1`, [tenantId]);
        const counted = await ownInspector.query(
          `SELECT u.term_hash::text, count(*)::int AS df FROM brain.chunks c CROSS JOIN LATERAL unnest(c.term_hashes) AS u(term_hash) WHERE c.tenant_id = $1 GROUP BY 1 ORDER BY 1`,
          [tenantId],
        );
        return { sizes: blocks.rows.map((row) => row.size), stored: df.rows, derived: counted.rows };
      };

      const keeping = serviceWith({ mergeGatherMs: 0 });
      const tenant = randomUUID();
      const { chunkCount } = await runWithTenant({ tenantId: tenant }, () => keeping.brain.ingest(document));
      expect(chunkCount).toBeGreaterThan(3);
      await drained(tenant);
      expect(keeping.repository.inputs).toEqual({ known: chunkCount, read: 0 });

      // Holding nothing (as after a restart, or a chunk stored by another process): every chunk is read back.
      const holdingNone = serviceWith({ mergeGatherMs: 0, waitingTermsMaxBytes: 0 });
      const other = randomUUID();
      await runWithTenant({ tenantId: other }, () => holdingNone.brain.ingest(document));
      await drained(other);
      expect(holdingNone.repository.inputs).toEqual({ known: 0, read: chunkCount });

      // Other tenants' hashes differ; the blocks' sizes and the document frequencies do not.
      const [kept, read] = [await blocksAndStatistics(tenant), await blocksAndStatistics(other)];
      expect(kept.stored).toEqual(kept.derived);
      expect(read.stored).toEqual(read.derived);
      expect(kept.sizes).toEqual(read.sizes);
      expect(kept.sizes.length).toBeGreaterThan(3);
      expect((await runWithTenant({ tenantId: tenant }, () => keeping.brain.search('klystrons magnetrons', 3))).map((r) => r.title)).toEqual(['Tubes', 'Tubes', 'Tubes']);
    });

    it('gathers longer for the next merge while a tenant keeps loading, ends that gathering once no document has come for the gathering time, and gathers as long as before once it has stopped', async () => {
      const tenant = randomUUID();
      const gatherMs = 2_000;
      const { brain, repository } = serviceWith({ mergeGatherMs: gatherMs });
      const ingest = ingesterFor(brain, tenant, 'a klystron amplifies microwaves');
      // The first merge, its batch taken, is held until a second document has arrived: the tenant is loading.
      const { firstTaken, release, restore } = holdingFirstMerge(repository);
      try {
        await ingest('First');
        await firstTaken;
        await ingest('Second');
        release();
        // More documents, each well within the gathering time of the one before: all gather for the next merge.
        for (const title of ['Third', 'Fourth', 'Fifth']) {
          await new Promise((resolve) => setTimeout(resolve, 300));
          await ingest(title);
        }
        const last = Date.now();
        await drained(tenant);
        expect(repository.merges.map(({ merged }) => merged)).toEqual([1, 4]);
        // Not before the load had been quiet for the gathering time, and well before four times it had passed (freed + 8 s at the earliest).
        expect(repository.merges[1]?.at).toBeGreaterThanOrEqual(last + gatherMs - 20);
        expect(repository.merges[1]?.at).toBeLessThan(last + gatherMs + 2_000);
      } finally {
        restore();
      }
      // Nothing arrived during that merge: the next document gathers the usual time.
      const lone = Date.now();
      await ingest('Sixth');
      await drained(tenant);
      expect(repository.merges.map(({ merged }) => merged)).toEqual([1, 4, 1]);
      expect(repository.merges[2]?.at).toBeGreaterThanOrEqual(lone + gatherMs);
      expect(repository.merges[2]?.at).toBeLessThan(lone + LOADING_GATHER_FACTOR * gatherMs);
    });

    it('ends a fast load’s gathering once no document has come for a few of its gaps, long before the gathering time', async () => {
      const tenant = randomUUID();
      const gatherMs = 3_000;
      const { brain, repository } = serviceWith({ mergeGatherMs: gatherMs });
      const ingest = ingesterFor(brain, tenant, 'a gyrotron heats plasma');
      const { firstTaken, release, restore } = holdingFirstMerge(repository);
      try {
        await ingest('First');
        await firstTaken;
        // During the first merge and after it.
        await fastLoad(ingest, 12, release);
        const last = Date.now();
        await drained(tenant);
        // (A slow machine may end the gathering early once or twice: every chunk is merged all the same.)
        expect(repository.merges.reduce<number>((sum, { merged }) => sum + (merged ?? 0), 0)).toBe(13);
        // The last merge: not before the least quiet time, and well before the gathering time (3 s) it waited before.
        const final = repository.merges[repository.merges.length - 1];
        expect(final?.at).toBeGreaterThanOrEqual(last + MIN_QUIET_MS - 20);
        expect(final?.at).toBeLessThan(last + gatherMs / 2);
      } finally {
        restore();
      }
    });

    it('does not end a loading gathering while a document of the tenant is under way, however long it takes', async () => {
      const tenant = randomUUID();
      const gatherMs = 3_000;
      const { brain, repository } = serviceWith({ mergeGatherMs: gatherMs });
      const ingest = ingesterFor(brain, tenant, 'a travelling-wave tube amplifies');
      const { firstTaken, release, restore } = holdingFirstMerge(repository);
      // The last document's transaction is held for 1.5 s: far past the fast load's quiet time.
      let slowDone = 0;
      const insert = repository.insertDocument.bind(repository);
      const slow = jest.spyOn(repository, 'insertDocument').mockImplementation(async (manager, document, ...rest) => {
        if (document.title === 'Slow') await new Promise((resolve) => setTimeout(resolve, 1_500));
        const stored = await insert(manager, document, ...rest);
        if (document.title === 'Slow') slowDone = Date.now();
        return stored;
      });
      try {
        await ingest('First');
        await firstTaken;
        await fastLoad(ingest, 8, release);
        await ingest('Slow');
        await drained(tenant);
        expect(repository.merges.reduce<number>((sum, { merged }) => sum + (merged ?? 0), 0)).toBe(10);
        // The fast documents did not merge on their own while the slow one was under way: it joined them.
        expect(repository.merges.map(({ merged }) => merged)).toEqual([1, 9]);
        expect(repository.merges[1]?.at).toBeGreaterThanOrEqual(slowDone);
      } finally {
        slow.mockRestore();
        restore();
      }
    });

    it('keeps gathering while a tenant keeps loading, until four times the gathering time', async () => {
      const tenant = randomUUID();
      const gatherMs = 1_500;
      const { brain, repository } = serviceWith({ mergeGatherMs: gatherMs });
      const ingest = ingesterFor(brain, tenant, 'a magnetron oscillates');
      const { firstTaken, release, restore } = holdingFirstMerge(repository);
      try {
        await ingest('First');
        await firstTaken;
        await ingest('Second');
        const freed = Date.now();
        release();
        // Two loaders, each a document every 50 ms, until well past the loading gather: the gathering
        // ends at its deadline, not for a quiet time (one of them nearly always has a document under
        // way, so a stall of the machine's cannot end the gathering early either).
        let sent = 0;
        const loader = async (): Promise<void> => {
          while (Date.now() < freed + LOADING_GATHER_FACTOR * gatherMs + 2_000) {
            await new Promise((resolve) => setTimeout(resolve, 50));
            await ingest(`Loading ${sent++}`);
          }
        };
        await Promise.all([loader(), loader()]);
        await drained(tenant);
        const merges = repository.merges.map(({ merged }) => merged);
        expect(merges.reduce<number>((sum, merged) => sum + (merged ?? 0), 0)).toBe(2 + sent);
        expect(repository.merges[1]?.at).toBeGreaterThanOrEqual(freed + LOADING_GATHER_FACTOR * gatherMs);
        expect(repository.merges[1]?.at).toBeLessThan(freed + LOADING_GATHER_FACTOR * gatherMs + 1_500);
      } finally {
        restore();
      }
    });

    it('merges nothing once stopped, though a merge was gathering', async () => {
      const tenant = randomUUID();
      const { brain, repository } = serviceWith({ mergeGatherMs: 200 });
      await runWithTenant({ tenantId: tenant }, () => brain.ingest({ title: 'Note', content: 'A magnetron oscillates.' }));
      await brain.stopMerging();
      await new Promise((resolve) => setTimeout(resolve, 600));
      expect(repository.merges).toEqual([]);
      expect(await waiting(tenant)).toBe(1);
    });

    it('refuses gathering times a timer cannot keep', () => {
      for (const mergeGatherMs of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 31]) expect(() => serviceWith({ mergeGatherMs })).toThrow(RangeError);
    });
  });
});
