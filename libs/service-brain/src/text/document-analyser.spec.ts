import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { TermHasher } from '../index/blind-index';
import { DEFAULT_CHUNKING } from './chunker';
import { analyseDocument } from './document-analysis';
import { WorkerDocumentAnalysis } from './document-analyser';

const TENANT = '00000000-0000-4000-8000-000000000001';
const paragraph = (n: number): string => `Paragraph ${n}: klystrons, magnetrons and travelling-wave tubes amplify microwave signals. `.repeat(14);
const large = Array.from({ length: 20 }, (_, n) => paragraph(n)).join('\n\n');

/** A worker module that fails every task, as a thread that cannot analyse would. */
function failingWorker(): string {
  const file = path.join(os.tmpdir(), `failing-analysis-worker-${process.pid}.cjs`);
  writeFileSync(file, "module.exports = async () => { throw new Error('analysis thread down'); };\n");
  return file;
}

/** A worker module that cannot even load: the thread fails before it takes a task. */
function unloadableWorker(): string {
  const file = path.join(os.tmpdir(), `unloadable-analysis-worker-${process.pid}.cjs`);
  writeFileSync(file, "throw new Error('analysis module does not load');\n");
  return file;
}

/** A thread loads the TypeScript sources through the project's loader, which may first compile them all (a clean checkout): minutes on a slow machine, once. */
const THREAD_TIMEOUT_MS = 180_000;

describe('WorkerDocumentAnalysis', () => {
  const key = randomBytes(32);
  let analysis: WorkerDocumentAnalysis | undefined;

  beforeAll(async () => {
    const warm = new WorkerDocumentAnalysis({ threads: 1 });
    try {
      await warm.analyse(TENANT, key, new TermHasher(key), large, 'Warm-up', DEFAULT_CHUNKING);
    } finally {
      await warm.close();
    }
  }, THREAD_TIMEOUT_MS);

  afterEach(async () => {
    await analysis?.close();
    analysis = undefined;
  });

  it(
    'analyses a large document on a thread exactly as on the service thread, the same keyed hashes included',
    async () => {
      analysis = new WorkerDocumentAnalysis({ threads: 1 });
      const hasher = new TermHasher(key);
      expect(large.length).toBeGreaterThan(16_384);
      const threaded = await analysis.analyse(TENANT, key, hasher, large, 'Tubes', DEFAULT_CHUNKING);
      expect(analysis.counts).toEqual({ threaded: 1, inThread: 0, failures: 0 });
      expect(threaded).toEqual(await analyseDocument(new TermHasher(key), large, 'Tubes', DEFAULT_CHUNKING));
      // Another tenant's key gives other hashes on the thread too.
      const other = randomBytes(32);
      const otherTenant = await analysis.analyse('00000000-0000-4000-8000-000000000002', other, new TermHasher(other), large, 'Tubes', DEFAULT_CHUNKING);
      expect(otherTenant.map((chunk) => chunk.text)).toEqual(threaded.map((chunk) => chunk.text));
      expect([...(otherTenant[0]?.hashes ?? [])]).not.toEqual([...(threaded[0]?.hashes ?? [])]);
      expect(otherTenant).toEqual(await analyseDocument(new TermHasher(other), large, 'Tubes', DEFAULT_CHUNKING));
    },
    THREAD_TIMEOUT_MS,
  );

  it(
    'analyses small documents, and documents past its limit in flight, on the service thread',
    async () => {
      analysis = new WorkerDocumentAnalysis({ threads: 1, maxInFlight: 2 });
      const hasher = new TermHasher(key);
      await analysis.analyse(TENANT, key, hasher, 'A klystron amplifies microwaves.', 'Note', DEFAULT_CHUNKING);
      expect(analysis.counts).toEqual({ threaded: 0, inThread: 1, failures: 0 });
      const results = await Promise.all([1, 2, 3, 4].map(() => analysis!.analyse(TENANT, key, hasher, large, 'Tubes', DEFAULT_CHUNKING)));
      expect(analysis.counts).toEqual({ threaded: 2, inThread: 3, failures: 0 });
      for (const result of results) expect(result).toEqual(results[0]);
    },
    THREAD_TIMEOUT_MS,
  );

  it.each([
    ['a thread fails its task', failingWorker],
    ['a thread cannot even start (unheard, that would end the process)', unloadableWorker],
  ])(
    'falls back to the service thread when %s, says so once, and stays there for a while',
    async (_case, worker) => {
      const errors: string[] = [];
      analysis = new WorkerDocumentAnalysis({ threads: 1, filename: worker(), retryAfterMs: 60_000, logger: { error: (message) => errors.push(message) } });
      const hasher = new TermHasher(key);
      const expected = await analyseDocument(new TermHasher(key), large, 'Tubes', DEFAULT_CHUNKING);
      expect(await analysis.analyse(TENANT, key, hasher, large, 'Tubes', DEFAULT_CHUNKING)).toEqual(expected);
      expect(await analysis.analyse(TENANT, key, hasher, large, 'Tubes', DEFAULT_CHUNKING)).toEqual(expected);
      expect(analysis.counts).toEqual({ threaded: 0, inThread: 2, failures: 1 });
      expect(errors).toEqual(['A document analysis thread failed; analysing on the service thread for a while']);
    },
    THREAD_TIMEOUT_MS,
  );

  it(
    'tries a thread again once the wait after a failure is over',
    async () => {
      analysis = new WorkerDocumentAnalysis({ threads: 1, filename: failingWorker(), retryAfterMs: 0 });
      const hasher = new TermHasher(key);
      await analysis.analyse(TENANT, key, hasher, large, 'Tubes', DEFAULT_CHUNKING);
      await analysis.analyse(TENANT, key, hasher, large, 'Tubes', DEFAULT_CHUNKING);
      expect(analysis.counts).toEqual({ threaded: 0, inThread: 2, failures: 2 });
    },
    THREAD_TIMEOUT_MS,
  );

  it(
    'once closed, analyses on the service thread, a document under way on a thread included',
    async () => {
      analysis = new WorkerDocumentAnalysis({ threads: 1 });
      const hasher = new TermHasher(key);
      const underWay = analysis.analyse(TENANT, key, hasher, large, 'Tubes', DEFAULT_CHUNKING);
      await analysis.close();
      const expected = await analyseDocument(new TermHasher(key), large, 'Tubes', DEFAULT_CHUNKING);
      expect(await underWay).toEqual(expected);
      expect(await analysis.analyse(TENANT, key, hasher, large, 'Tubes', DEFAULT_CHUNKING)).toEqual(expected);
      expect(analysis.counts.failures).toBe(0);
      expect(analysis.counts.inThread).toBeGreaterThanOrEqual(1);
      expect(analysis.counts.threaded + analysis.counts.inThread).toBe(2);
    },
    THREAD_TIMEOUT_MS,
  );

  it('refuses settings it cannot work with', () => {
    expect(() => new WorkerDocumentAnalysis({ threads: 0 })).toThrow(RangeError);
    expect(() => new WorkerDocumentAnalysis({ threads: 1.5 })).toThrow(RangeError);
    expect(() => new WorkerDocumentAnalysis({ maxInFlight: 0 })).toThrow(RangeError);
  });
});
