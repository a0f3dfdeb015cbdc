import { Gauge, type Registry } from 'prom-client';
import { loadConfig } from '@mission/config';
import { contextLogger, databaseMetrics, type ServiceDefinition } from '@mission/runtime';
import { DataSource } from 'typeorm';
import { ConsumerGroups, Topics } from '@mission/contracts';
import { MessageBus } from '@mission/messaging';
import { openServiceDatabase, pingDatabase, RecordCipher, schemaMaintenance, serviceRoleName } from '@mission/persistence';
import type { KeyProvider } from '@mission/crypto';
import { brainRequestHandlers } from './brain/brain.handlers';
import { BrainRepository } from './brain/brain.repository';
import { BRAIN_SCHEMA, BrainService, type BrainServiceLogger } from './brain/brain.service';
import { BrainServiceConfigSchema, EmbeddedBrainConfigSchema, resolveIndexSecret } from './brain.config';
import { DerivedTenantIndexKeys, TenantIndexKeys } from './index/blind-index';
import { BM25_DEFAULTS } from './ranking/bm25';
import { DEFAULT_CHUNKING } from './text/chunker';
import { WorkerDocumentAnalysis } from './text/document-analyser';
import { CreateBrain1764633600000 } from './migrations/1764633600000-create-brain';
import { EnableRowLevelSecurity1764720000000 } from './migrations/1764720000000-enable-row-level-security';
import { SealBrainContent1764892800000 } from './migrations/1764892800000-seal-brain-content';
import { TenantContentBytes1766793600000 } from './migrations/1766793600000-tenant-content-bytes';
import { PromptAutovacuum1766707200000 } from './migrations/1766707200000-prompt-autovacuum';
import { PostingBlocks1766880000000 } from './migrations/1766880000000-posting-blocks';
import { CompactPostingBlocks1766966400000 } from './migrations/1766966400000-compact-posting-blocks';
import { DocumentFrequenciesFromBlocks1767052800000 } from './migrations/1767052800000-document-frequencies-from-blocks';
import { OpaqueColumns1767139200000 } from './migrations/1767139200000-opaque-columns';
import { KeyColumnStatistics1767225600000 } from './migrations/1767225600000-key-column-statistics';

export const BRAIN_SERVICE_GROUP = ConsumerGroups.brainService;

export interface BrainServiceOptions {
  readonly databaseUrl: string;
  /** Not started yet: the service registers its handlers, the caller starts the bus. */
  readonly bus: MessageBus;
  /** The blind-index secret (BRAIN_INDEX_KEY), or a key provider. */
  readonly indexKeys: Buffer | TenantIndexKeys;
  /** Wraps the tenants' data keys: document content and chunk texts are stored sealed under them. */
  readonly keys: KeyProvider;
  /** Where the service's database pool are reported (Prometheus), if anywhere. */
  readonly metrics?: Registry;
  readonly logger?: BrainServiceLogger;
  /** How often to look for chunks left waiting for a merge (e.g. after a crash); the first look is at start. */
  readonly mergeSweepIntervalMs?: number;
}

const DEFAULT_MERGE_SWEEP_INTERVAL_MS = 30_000;

/** How long a scrape waits for the backlog's count before leaving the series out. */
const BACKLOG_QUERY_TIMEOUT_MS = 1_000;

/**
 * `brain_unmerged_chunks`: chunks stored (and searchable) but not merged into the index yet. It
 * rises during a bulk load and falls back to zero; one that stays up means merges fail (logged) or
 * cannot keep up, and queries read the waiting chunks the slow way meanwhile.
 */
function unmergedChunksGauge(registry: Registry, brain: BrainService): void {
  new Gauge({
    name: 'brain_unmerged_chunks',
    help: 'Brain chunks stored and searchable but not yet merged into the posting blocks (all tenants).',
    labelNames: ['schema'],
    registers: [registry],
    async collect() {
      // A database that is down or slow must not take the rest of /metrics with it: the series is
      // left out of this scrape instead.
      this.remove({ schema: BRAIN_SCHEMA });
      try {
        const timeout = new Promise<never>((_, reject) => setTimeout(() => reject(new Error('timeout')), BACKLOG_QUERY_TIMEOUT_MS).unref());
        this.set({ schema: BRAIN_SCHEMA }, await Promise.race([brain.unmergedChunks(), timeout]));
      } catch {
        // unknown this time: no sample
      }
    },
  });
}

export interface BrainServiceHandle {
  ready(): Promise<{ up: boolean; details: Record<string, unknown> }>;
  stop(): Promise<void>;
}

function keyProvider(indexKeys: Buffer | TenantIndexKeys): TenantIndexKeys {
  return Buffer.isBuffer(indexKeys) ? new DerivedTenantIndexKeys(indexKeys) : indexKeys;
}

/** The brain schema's migrations, in order. */
export const BRAIN_MIGRATIONS = [
  CreateBrain1764633600000,
  EnableRowLevelSecurity1764720000000,
  SealBrainContent1764892800000,
  PromptAutovacuum1766707200000,
  TenantContentBytes1766793600000,
  PostingBlocks1766880000000,
  CompactPostingBlocks1766966400000,
  DocumentFrequenciesFromBlocks1767052800000,
  OpaqueColumns1767139200000,
  KeyColumnStatistics1767225600000,
];

/**
 * The `brain` schema, migrated by the connecting user, queried as the service role (row-level
 * security applies). `migrations`: all of them but for a test of one on a database left before it.
 */
export async function openBrainDatabase(databaseUrl: string, migrations: ReadonlyArray<(typeof BRAIN_MIGRATIONS)[number]> = BRAIN_MIGRATIONS): Promise<DataSource> {
  return openServiceDatabase({
    url: databaseUrl,
    schema: BRAIN_SCHEMA,
    entities: [],
    migrations: [...migrations],
    applicationName: 'brain-service',
    serviceRole: serviceRoleName(BRAIN_SCHEMA),
  });
}

/** Tenant-scoped knowledge store: owns schema `brain`, answers `brain.requests.v1`. */
export async function startBrainService(options: BrainServiceOptions): Promise<BrainServiceHandle> {
  const dataSource = await openBrainDatabase(options.databaseUrl);
  if (options.metrics) databaseMetrics(options.metrics, BRAIN_SCHEMA, dataSource);
  const brain = new BrainService(
    dataSource,
    new BrainRepository(new RecordCipher(BRAIN_SCHEMA, options.keys)),
    keyProvider(options.indexKeys),
    { bm25: BM25_DEFAULTS, chunking: DEFAULT_CHUNKING, analysis: new WorkerDocumentAnalysis({ logger: options.logger }) },
    options.logger,
  );
  options.bus.serve(Topics.brainRequests, BRAIN_SERVICE_GROUP, brainRequestHandlers(brain));
  const sweep = (): void => {
    brain.sweepUnmerged().catch((error: unknown) => options.logger?.error('Looking for chunks waiting for a merge failed; looking again later', { error: String(error) }));
  };
  sweep();
  const sweeper = setInterval(sweep, options.mergeSweepIntervalMs ?? DEFAULT_MERGE_SWEEP_INTERVAL_MS);
  sweeper.unref();
  if (options.metrics) unmergedChunksGauge(options.metrics, brain);
  return {
    ready: async () => {
      const database = await pingDatabase(dataSource);
      return { up: database, details: { database: database ? 'up' : 'down', unmergedChunks: database ? await brain.unmergedChunks() : null } };
    },
    stop: async () => {
      clearInterval(sweeper);
      await brain.stopMerging();
      await dataSource.destroy();
    },
  };
}

export interface BrainReader {
  /** The tenant's `limit` best passages, for the tenant in the current tenant context. */
  search: BrainService['search'];
  close(): Promise<void>;
}

/**
 * The ranking of a brain database without the bus and without the public cap on `k`: for the
 * retrieval evaluation, which needs rankings 1000 deep as trec_eval does. Same code, same data,
 * same key as the service.
 */
export async function openBrainReader(options: Omit<BrainServiceOptions, 'bus'>): Promise<BrainReader> {
  const dataSource = await openBrainDatabase(options.databaseUrl);
  const brain = new BrainService(dataSource, new BrainRepository(new RecordCipher(BRAIN_SCHEMA, options.keys)), keyProvider(options.indexKeys));
  return { search: (text, limit) => brain.search(text, limit), close: () => dataSource.destroy() };
}

/**
 * brain-service as its own process runs it and as `npm start` starts it. Running alone it needs
 * BRAIN_INDEX_KEY; in the all-in-one process, without one, the key generated on the first start
 * and kept in the data directory.
 */
export const brainServiceDefinition: ServiceDefinition = {
  name: 'brain-service',
  readinessName: 'brainService',
  needsDatabase: true,
  ...schemaMaintenance(openBrainDatabase, BRAIN_SCHEMA),
  start: async ({ bus, logger, databaseUrl, metrics, keys, dataDir }) => {
    const indexKeys =
      dataDir === undefined ? loadConfig(BrainServiceConfigSchema).BRAIN_INDEX_KEY : await resolveIndexSecret(loadConfig(EmbeddedBrainConfigSchema).BRAIN_INDEX_KEY, dataDir);
    return startBrainService({ databaseUrl, bus, metrics, keys, indexKeys, logger: contextLogger(logger) });
  },
};
