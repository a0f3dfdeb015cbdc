/**
 * The cost of payload encryption, on versus off in one run, on the two paths it sits on:
 *
 *   node -r ./tools/register.cjs bench/encryption.ts [--samples=3000] [--requests=400] [--write]
 *
 * - At rest, submit: a tenant transaction on PostgreSQL that stores a mission's content sealed
 *   (RecordCipher.seal: the tenant's data-key lookup, AES-256-GCM) versus one that stores the same
 *   content as JSON. Query: opening a result page (10 passages and their document) versus parsing
 *   the same JSON.
 * - In transit: a submit request and a Brain reply through the sealed Kafka codec (encode, then
 *   decode as the receiver does) versus plain JSON.
 * - End to end, for scale: the median of POST /api/missions and GET /api/brain/query?k=10 through
 *   the all-in-one process (encryption on), so the added microseconds read as a share of a request.
 *
 * Variants alternate sample by sample, so both see the same machine. Medians, p90 and the ratio
 * on ÷ off; `--write` keeps the report in bench/results/encryption-<date>.{json,md}.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { KeyEncryptionKey, LocalKeyProvider, TransitCipher } from '@mission/crypto';
import { plainJsonCodec, sealedJsonCodec } from '@mission/messaging';
import { createTestDatabase, dataKeysTableSql, RecordCipher, tenantTransaction } from '@mission/persistence';
import { runWithTenant } from '@mission/tenant-context';
import { DataSource, EntityManager } from 'typeorm';
import { call } from '../test/support/api-client';
import { startEmbeddedBrainStack } from '../test/support/embedded-brain-stack';

const REPO_ROOT = path.join(__dirname, '..');
const TENANT = '0f3c2a1e-8d4b-4f5a-9c6e-7b8a9d0e1f20';

const log = (message: string): void => {
  process.stderr.write(`[bench:encryption] ${message}\n`);
};

function parseOptions(argv: readonly string[]): { samples: number; requests: number; write: boolean } {
  const values = new Map(argv.map((arg) => /^--([a-z]+)(?:=(.*))?$/.exec(arg)).map((match) => [match?.[1] ?? '', match?.[2] ?? 'true']));
  const unknown = [...values.keys()].filter((key) => !['samples', 'requests', 'write'].includes(key));
  if (unknown.length > 0) throw new Error(`Unknown option(s): ${unknown.join(', ')}; known: --samples --requests --write`);
  const number = (name: string, fallback: number): number => {
    const value = values.has(name) ? Number(values.get(name)) : fallback;
    if (!Number.isInteger(value) || value <= 0) throw new Error(`--${name} must be a positive integer`);
    return value;
  };
  return { samples: number('samples', 3_000), requests: number('requests', 400), write: values.has('write') };
}

interface Stats {
  readonly p50: number;
  readonly p90: number;
}

function stats(samplesMs: number[]): Stats {
  const sorted = [...samplesMs].sort((a, b) => a - b);
  const at = (fraction: number) => sorted[Math.min(sorted.length - 1, Math.ceil(fraction * sorted.length) - 1)] ?? NaN;
  return { p50: at(0.5), p90: at(0.9) };
}

interface Comparison {
  readonly path: string;
  readonly on: Stats;
  readonly off: Stats;
  /** Median added by encryption, in µs. */
  readonly addedMicroseconds: number;
  readonly ratio: number;
}

/** Runs `on` and `off` alternately `samples` times each (after a warm-up), timing every call. */
async function compare(pathName: string, samples: number, on: () => Promise<unknown>, off: () => Promise<unknown>): Promise<Comparison> {
  const warmup = Math.min(200, samples);
  for (let i = 0; i < warmup; i++) {
    await on();
    await off();
  }
  const times = { on: [] as number[], off: [] as number[] };
  for (let i = 0; i < samples; i++) {
    for (const variant of i % 2 === 0 ? (['on', 'off'] as const) : (['off', 'on'] as const)) {
      const started = performance.now();
      await (variant === 'on' ? on() : off());
      times[variant].push(performance.now() - started);
    }
  }
  const result = { path: pathName, on: stats(times.on), off: stats(times.off) };
  const comparison = { ...result, addedMicroseconds: Math.round((result.on.p50 - result.off.p50) * 1000), ratio: Math.round((result.on.p50 / result.off.p50) * 100) / 100 };
  log(`${pathName}: on p50 ${comparison.on.p50.toFixed(3)} ms, off ${comparison.off.p50.toFixed(3)} ms (+${comparison.addedMicroseconds} µs, ×${comparison.ratio})`);
  return comparison;
}

/** A mission's stored content, as a submit with an approval step and some input makes it. */
function missionContent(): Record<string, unknown> {
  return {
    title: 'Quarterly dielectric survey',
    objective: 'Summarise what the knowledge store holds on the dielectric constant of liquids at microwave frequencies. '.repeat(4),
    input: { region: 'EMEA', owners: ['ada', 'grace'], budget: 12_000, notes: 'x'.repeat(600) },
    steps: [
      { type: 'brain.query', index: 0, status: 'pending' },
      { type: 'approval', title: 'OK to publish?', description: 'Review the summary before it goes out.', index: 1, status: 'pending' },
    ],
    metadata: { team: 'materials', ticket: 'MS-1234' },
    result: null,
    error: null,
  };
}

/** Ten passages of about 1,200 characters, as a Brain reply carries them. */
function brainReply(): Record<string, unknown> {
  return {
    query: 'microwave dielectric liquids',
    results: Array.from({ length: 10 }, (_, i) => ({
      documentId: `00000000-0000-4000-8000-00000000000${i % 10}`,
      chunkId: `10000000-0000-4000-8000-00000000000${i % 10}`,
      title: `Measurements of permittivity, part ${i}`,
      text: 'The dielectric constant of polar liquids falls with frequency as dipoles lag the field. '.repeat(14),
      score: 12.5 - i,
    })),
  };
}

async function main(): Promise<void> {
  const options = parseOptions(process.argv.slice(2));
  const keys = new LocalKeyProvider(KeyEncryptionKey.generate());
  const comparisons: Comparison[] = [];

  // --- at rest, on the machine's PostgreSQL -------------------------------------------------
  const adminUrl = process.env.BENCH_POSTGRES_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
  const database = await createTestDatabase(adminUrl, 'bench_encryption');
  const dataSource = new DataSource({ type: 'postgres', url: database.url, poolSize: 2 });
  await dataSource.initialize();
  try {
    await dataSource.query('CREATE SCHEMA bench');
    for (const statement of dataKeysTableSql('bench')) await dataSource.query(statement);
    await dataSource.query('CREATE TABLE bench.missions (id serial PRIMARY KEY, tenant_id uuid NOT NULL, sealed text)');
    const cipher = new RecordCipher('bench', keys);
    const content = missionContent();
    const reply = brainReply() as { results: Array<{ text: string; title: string }> };
    await runWithTenant({ tenantId: TENANT }, async () => {
      const store = (value: (manager: EntityManager) => Promise<string>) => () =>
        tenantTransaction(dataSource, async (manager) => manager.query('INSERT INTO bench.missions (tenant_id, sealed) VALUES ($1, $2)', [TENANT, await value(manager)]));
      comparisons.push(
        await compare(
          'at rest: store a submitted mission (transaction with one INSERT)',
          options.samples,
          store((manager) => cipher.seal(manager, { table: 'missions', id: 'm' }, content)),
          store(async () => JSON.stringify(content)),
        ),
      );
      // What a query result costs to open: ten passages and their document, key cached as in a running service.
      const sealedPage = await tenantTransaction(dataSource, async (manager) => {
        const page: string[] = [];
        for (const [i, passage] of reply.results.entries()) page.push(await cipher.seal(manager, { table: 'chunks', id: String(i) }, passage.text));
        return page;
      });
      const sealedDocument = await tenantTransaction(dataSource, (manager) => cipher.seal(manager, { table: 'documents', id: 'd' }, { title: 'T', source: null, metadata: {} }));
      const plainPage = reply.results.map((passage) => JSON.stringify(passage.text));
      comparisons.push(
        await compare(
          'at rest: open a page of 10 passages and their document',
          options.samples,
          async () => {
            await cipher.open(dataSource, { table: 'documents', id: 'd' }, sealedDocument);
            await Promise.all(sealedPage.map((sealed, i) => cipher.open(dataSource, { table: 'chunks', id: String(i) }, sealed)));
          },
          async () => plainPage.map((text) => JSON.parse(text) as string),
        ),
      );
    });
  } finally {
    await dataSource.destroy();
    await database.drop();
  }

  // --- in transit: the Kafka codec ------------------------------------------------------------
  const sealed = sealedJsonCodec(new TransitCipher(keys));
  const receiver = sealedJsonCodec(new TransitCipher(keys));
  let sequence = 0;
  const roundTrip = (codec: typeof plainJsonCodec, decoder: typeof plainJsonCodec, payload: unknown) => async () => {
    const headers = { 'message-id': `m-${sequence++}`, 'message-type': 'x', 'tenant-id': TENANT };
    const encoded = await codec.encode(payload, headers);
    const value = typeof encoded.value === 'string' ? Buffer.from(encoded.value) : encoded.value;
    return decoder.decode(value, { ...headers, ...encoded.headers });
  };
  const submitRequest = { mission: missionContent() };
  comparisons.push(
    await compare(
      'in transit: a submit request, encoded and decoded',
      options.samples,
      roundTrip(sealed, receiver, submitRequest),
      roundTrip(plainJsonCodec, plainJsonCodec, submitRequest),
    ),
  );
  comparisons.push(
    await compare(
      'in transit: a Brain reply of 10 passages, encoded and decoded',
      options.samples,
      roundTrip(sealed, receiver, brainReply()),
      roundTrip(plainJsonCodec, plainJsonCodec, brainReply()),
    ),
  );

  // --- end to end, for scale -----------------------------------------------------------------
  const stack = await startEmbeddedBrainStack({ label: 'bench-encryption', tenantName: 'Encryption bench', log });
  let endToEnd: { submit: Stats; query: Stats };
  try {
    for (let i = 0; i < 200; i++) {
      await call(stack.gatewayUrl, 'POST', '/api/brain/documents', {
        token: stack.token,
        body: { title: `Doc ${i}`, content: `${'The dielectric constant of polar liquids falls with frequency. '.repeat(20)} sample ${i}` },
      });
    }
    const submit: number[] = [];
    const query: number[] = [];
    for (let i = 0; i < options.requests; i++) {
      let started = performance.now();
      await call(stack.gatewayUrl, 'POST', '/api/missions', { token: stack.token, body: { title: 'Bench', objective: 'microwave dielectric liquids', input: { n: i } } });
      submit.push(performance.now() - started);
      started = performance.now();
      await call(stack.gatewayUrl, 'GET', '/api/brain/query?q=dielectric%20polar%20liquids&k=10', { token: stack.token });
      query.push(performance.now() - started);
    }
    endToEnd = { submit: stats(submit.slice(20)), query: stats(query.slice(20)) };
    log(`end to end (encryption on): submit p50 ${endToEnd.submit.p50.toFixed(2)} ms, query p50 ${endToEnd.query.p50.toFixed(2)} ms`);
  } finally {
    await stack.stop();
  }

  const report = { schema: 1, suite: 'encryption', date: new Date().toISOString(), samplesPerVariant: options.samples, comparisons, endToEnd };
  const markdown = [
    `# Encryption cost, ${report.date.slice(0, 10)}`,
    '',
    `On versus off in one run, ${options.samples} alternating samples per variant (ms; added = difference of the medians).`,
    '',
    '| path | on p50 | off p50 | on p90 | off p90 | added (µs) | on ÷ off |',
    '|---|--:|--:|--:|--:|--:|--:|',
    ...comparisons.map(
      (c) => `| ${c.path} | ${c.on.p50.toFixed(3)} | ${c.off.p50.toFixed(3)} | ${c.on.p90.toFixed(3)} | ${c.off.p90.toFixed(3)} | ${c.addedMicroseconds} | ${c.ratio} |`,
    ),
    '',
    `End to end through the all-in-one process (encryption on), ${options.requests} requests each: POST /api/missions p50 ${endToEnd.submit.p50.toFixed(2)} ms (p90 ${endToEnd.submit.p90.toFixed(2)}), GET /api/brain/query?k=10 p50 ${endToEnd.query.p50.toFixed(2)} ms (p90 ${endToEnd.query.p90.toFixed(2)}).`,
    '',
  ].join('\n');
  process.stdout.write(`${markdown}\n`);
  if (options.write) {
    const dir = path.join(REPO_ROOT, 'bench', 'results');
    mkdirSync(dir, { recursive: true });
    const base = path.join(dir, `encryption-${report.date.slice(0, 10)}`);
    writeFileSync(`${base}.json`, `${JSON.stringify(report, null, 2)}\n`);
    writeFileSync(`${base}.md`, markdown);
    log(`results written to ${path.relative(REPO_ROOT, base)}.{json,md}`);
  }
}

main().catch((error: unknown) => {
  log(error instanceof Error ? (error.stack ?? error.message) : String(error));
  process.exitCode = 1;
});
