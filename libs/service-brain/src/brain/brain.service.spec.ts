import { randomBytes, randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import { DomainError, ErrorCode, encodeCursor } from '@mission/contracts';
import { MissingTenantContextError, runWithTenant } from '@mission/tenant-context';
import { DerivedTenantIndexKeys } from '../index/blind-index';
import { BrainRepository } from './brain.repository';
import { KeyEncryptionKey, LocalKeyProvider } from '@mission/crypto';
import { RecordCipher } from '@mission/persistence';
import { BrainService, MIN_QUIET_MS, nextGap, QUIET_GAPS, quietTime } from './brain.service';

/** Only the paths that end before the database: a data source that fails loudly if touched. */
const untouchable = new Proxy({} as DataSource, {
  get: () => {
    throw new Error('the database was used');
  },
});

async function failure(promise: Promise<unknown>): Promise<DomainError> {
  const error = await promise.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  if (!(error instanceof DomainError)) throw new Error(`expected a DomainError, got ${String(error)}`);
  return error;
}

describe('BrainService before the database', () => {
  const brain = new BrainService(
    untouchable,
    new BrainRepository(new RecordCipher('brain', new LocalKeyProvider(KeyEncryptionKey.generate()))),
    new DerivedTenantIndexKeys(randomBytes(32)),
  );
  const asTenant = <T>(work: () => Promise<T>): Promise<T> => runWithTenant({ tenantId: randomUUID() }, work);

  it('answers a query of stop words and punctuation with an empty ranking, echoing the trimmed query', async () => {
    await expect(asTenant(() => brain.query({ q: '  the AND (of) OR "" ; -- ', k: 3 }))).resolves.toEqual({ query: 'the AND (of) OR "" ; --', results: [] });
  });

  it('refuses an empty query, an out-of-range k, an over-long query and unknown parameters', async () => {
    expect((await failure(asTenant(() => brain.query({ q: '   ' })))).code).toBe(ErrorCode.ValidationFailed);
    expect((await failure(asTenant(() => brain.query({ q: 'x', k: 51 })))).errors?.[0]?.field).toBe('k');
    expect((await failure(asTenant(() => brain.query({ q: 'x', k: 'many' })))).errors?.[0]?.field).toBe('k');
    expect((await failure(asTenant(() => brain.query({ q: 'x'.repeat(10_001) })))).errors?.[0]?.field).toBe('q');
    expect((await failure(asTenant(() => brain.query({ q: 'x', sort: 'date' })))).errors?.[0]).toEqual({ field: 'sort', message: 'unknown field' });
  });

  it('refuses invalid documents: missing title, empty content, NUL characters, unknown fields', async () => {
    const fields = async (body: unknown): Promise<string[]> => ((await failure(asTenant(() => brain.ingest(body)))).errors ?? []).map((e) => e.field).sort();
    expect(await fields({ content: 'text' })).toEqual(['title']);
    expect(await fields({ title: 'T', content: ' \n ' })).toEqual(['content']);
    expect(await fields({ title: 'T\u0000', content: 'a\u0000b', metadata: { k: 'v\u0000' } })).toEqual(['content', 'metadata.k', 'title']);
    expect(await fields({ title: 'T', content: 'c', colour: 'red' })).toEqual(['colour']);
    expect(await fields({ title: 'x'.repeat(501), content: 'c', metadata: Object.fromEntries(Array.from({ length: 51 }, (_, n) => [`k${n}`, 'v'])) })).toEqual([
      'metadata',
      'title',
    ]);
  });

  it('refuses content above 10 MiB as payload_too_large', async () => {
    const error = await failure(asTenant(() => brain.ingest({ title: 'Big', content: 'é'.repeat(5 * 1024 * 1024 + 1) })));
    expect(error.code).toBe(ErrorCode.PayloadTooLarge);
  });

  it('refuses tampered or foreign cursors with a validation error naming the cursor', async () => {
    const genuine = encodeCursor({ at: new Date().toISOString(), id: randomUUID() });
    const tampered = [
      `${genuine.slice(0, -2)}!!`,
      Buffer.from('{"v":1,"at":"yesterday","id":"x"}').toString('base64url'),
      Buffer.from(JSON.stringify({ v: 1, at: new Date().toISOString(), id: randomUUID(), sql: "' OR 1=1" })).toString('base64url'),
      'not-a-cursor',
    ];
    for (const cursor of tampered) {
      const error = await failure(asTenant(() => brain.list({ cursor })));
      expect({ code: error.code, field: error.errors?.[0]?.field }).toEqual({ code: ErrorCode.ValidationFailed, field: 'cursor' });
    }
    expect((await failure(asTenant(() => brain.list({ limit: '0' })))).errors?.[0]?.field).toBe('limit');
    expect((await failure(asTenant(() => brain.list({ limit: '101' })))).errors?.[0]?.field).toBe('limit');
  });

  it('never runs without a tenant', async () => {
    await expect(brain.query({ q: 'x' })).rejects.toBeInstanceOf(MissingTenantContextError);
    await expect(brain.ingest({ title: 'T', content: 'c' })).rejects.toBeInstanceOf(MissingTenantContextError);
  });
});

describe('quietTime', () => {
  it('ends a loading gather after a few of the load’s gaps, within the least quiet time and the gathering time', () => {
    // No gap known yet: the whole gathering time, as before.
    expect(quietTime(undefined, 1_000)).toBe(1_000);
    expect(quietTime(5, 1_000)).toBe(MIN_QUIET_MS);
    expect(quietTime(20, 1_000)).toBe(QUIET_GAPS * 20);
    expect(quietTime(400, 1_000)).toBe(1_000);
    // A gathering time below the least quiet time wins.
    expect(quietTime(5, 50)).toBe(50);
  });
});

describe('nextGap', () => {
  it('averages the gaps between documents, the newest a quarter, and leaves out a whole gathering time without one', () => {
    expect(nextGap(undefined, 20, 1_000)).toBe(20);
    expect(nextGap(20, 60, 1_000)).toBe(30);
    // A document after a gathering time or more starts another load.
    expect(nextGap(20, 1_000, 1_000)).toBe(20);
    expect(nextGap(undefined, 5_000, 1_000)).toBeUndefined();
  });
});
