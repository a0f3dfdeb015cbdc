import { randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import { DecryptionError, KeyEncryptionKey, LocalKeyProvider } from '@mission/crypto';
import { runWithTenant } from '@mission/tenant-context';
import { dataKeysTableSql, isSealed, RecordCipher } from './data-keys';
import { tenantTransaction } from './database';
import { createTestDatabase, TestDatabase } from './test-database';

const ADMIN_URL = process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const SCHEMA = 'data_keys_it';

/** Tenant data keys on a real PostgreSQL: one per tenant, never outliving a rollback, bound to tenant and record. */
describe('RecordCipher on PostgreSQL', () => {
  let database: TestDatabase;
  let dataSource: DataSource;
  const keys = new LocalKeyProvider(KeyEncryptionKey.generate());
  const cipher = new RecordCipher(SCHEMA, keys);
  const [tenantA, tenantB] = [randomUUID(), randomUUID()];
  const record = { table: 'notes', id: 'n-1' };
  const seal = (tenantId: string, value: unknown, rollback = false) =>
    runWithTenant({ tenantId }, () =>
      tenantTransaction(dataSource, async (manager) => {
        const sealed = await cipher.seal(manager, record, value);
        if (rollback) throw Object.assign(new Error('rolled back'), { sealed });
        return sealed;
      }),
    );
  const open = (tenantId: string, sealed: string, at = record) => runWithTenant({ tenantId }, () => cipher.open(dataSource, at, sealed));
  const keysOf = async (tenantId: string) => (await dataSource.query(`SELECT id FROM "${SCHEMA}".data_keys WHERE tenant_id = $1`, [tenantId])).length as number;

  beforeAll(async () => {
    database = await createTestDatabase(ADMIN_URL, 'data_keys');
    dataSource = new DataSource({ type: 'postgres', url: database.url });
    await dataSource.initialize();
    await dataSource.query(`CREATE SCHEMA "${SCHEMA}"`);
    for (const statement of dataKeysTableSql(SCHEMA)) await dataSource.query(statement);
  });

  afterAll(async () => {
    await dataSource?.destroy();
    await database?.drop();
  });

  it('gives each tenant one data key, made by its first write and reused after', async () => {
    const first = await seal(tenantA, { n: 1 });
    const second = await seal(tenantA, { n: 2 });
    await seal(tenantB, { n: 3 });
    expect(await keysOf(tenantA)).toBe(1);
    expect(await keysOf(tenantB)).toBe(1);
    expect(first.split('.')[1]).toBe(second.split('.')[1]);
    expect(first).not.toBe(await seal(tenantA, { n: 1 }));
    await expect(open(tenantA, first)).resolves.toEqual({ n: 1 });
  });

  it('looks the newest key up once for many writes (a committed key only), not once per record', async () => {
    const tenant = randomUUID();
    await seal(tenant, { first: true });
    const lookups: string[] = [];
    const sealed = await runWithTenant({ tenantId: tenant }, () =>
      tenantTransaction(dataSource, async (manager) => {
        const counting = new Proxy(manager, {
          get: (target, property, receiver) =>
            property === 'query'
              ? (sql: string, parameters?: unknown[]) => {
                  if (sql.includes('data_keys')) lookups.push(sql);
                  return target.query(sql, parameters);
                }
              : Reflect.get(target, property, receiver),
        });
        const values: string[] = [];
        for (let n = 0; n < 5; n++) values.push(await cipher.seal(counting, { table: 'notes', id: `n-${n}` }, { n }));
        return values;
      }),
    );
    // The key the first write made was not remembered (its transaction might have rolled back): it
    // is looked up once, committed, and then serves the other four writes.
    expect(lookups).toHaveLength(1);
    await expect(runWithTenant({ tenantId: tenant }, () => cipher.open(dataSource, { table: 'notes', id: 'n-3' }, sealed[3]))).resolves.toEqual({ n: 3 });
  });

  it('never remembers a key its own transaction made and then rolled back, even after looking it up in that transaction', async () => {
    const tenant = randomUUID();
    const rolledBack = await runWithTenant({ tenantId: tenant }, () =>
      tenantTransaction(dataSource, async (manager) => {
        const sealed = [await cipher.seal(manager, record, { one: 1 }), await cipher.seal(manager, record, { two: 2 })];
        throw Object.assign(new Error('rolled back'), { sealed });
      }),
    ).catch((error: { sealed: string[] }) => error.sealed);
    // Both writes of that transaction used the key it made.
    expect(new Set(rolledBack.map((value) => value.split('.')[1])).size).toBe(1);
    const kept = await seal(tenant, { kept: true });
    expect(kept.split('.')[1]).not.toBe(rolledBack[0].split('.')[1]);
    expect(await keysOf(tenant)).toBe(1);
    await expect(open(tenant, kept)).resolves.toEqual({ kept: true });
  });

  it('retires a tenant’s data key once it is older than its age: the next write makes a new one, and old records still open', async () => {
    const tenant = randomUUID();
    const other = randomUUID();
    const rotating = new RecordCipher(SCHEMA, keys, 10_000, 60 * 60_000);
    const sealWith = (tenantId: string, value: unknown) => runWithTenant({ tenantId }, () => tenantTransaction(dataSource, (manager) => rotating.seal(manager, record, value)));
    const openWith = (tenantId: string, sealed: string) => runWithTenant({ tenantId }, () => rotating.open(dataSource, record, sealed));
    const old = await sealWith(tenant, { n: 'old' });
    const othersOld = await sealWith(other, { n: 'other' });
    expect((await sealWith(tenant, { n: 'same key' })).split('.')[1]).toBe(old.split('.')[1]);
    // Two hours pass for the tenant's key (its clock is the database's); the other tenant's key stays young.
    await dataSource.query(`UPDATE "${SCHEMA}".data_keys SET created_at = created_at - interval '2 hours' WHERE tenant_id = $1`, [tenant]);
    const fresh = new RecordCipher(SCHEMA, keys, 10_000, 60 * 60_000);
    const renewed = await runWithTenant({ tenantId: tenant }, () => tenantTransaction(dataSource, (manager) => fresh.seal(manager, record, { n: 'new' })));
    expect(renewed.split('.')[1]).not.toBe(old.split('.')[1]);
    expect(await keysOf(tenant)).toBe(2);
    expect((await runWithTenant({ tenantId: other }, () => tenantTransaction(dataSource, (manager) => fresh.seal(manager, record, { n: 'other again' })))).split('.')[1]).toBe(
      othersOld.split('.')[1],
    );
    await expect(openWith(tenant, old)).resolves.toEqual({ n: 'old' });
    await expect(openWith(tenant, renewed)).resolves.toEqual({ n: 'new' });
    // The next writes use the new key, not a third one.
    expect((await runWithTenant({ tenantId: tenant }, () => tenantTransaction(dataSource, (manager) => fresh.seal(manager, record, { n: 'again' })))).split('.')[1]).toBe(
      renewed.split('.')[1],
    );
    expect(await keysOf(tenant)).toBe(2);
  });

  it('joins sealed texts by commas into one buffer that PostgreSQL splits into texts that open, each for its own record only', async () => {
    const tenant = randomUUID();
    const values = ['first passage', 'ünïcödé, with a comma', '', 'x'.repeat(5_000), 'a "quoted"\nline'];
    const records = values.map((_, index) => ({ table: 'chunks', id: `c-${index}` }));
    const texts = await runWithTenant({ tenantId: tenant }, () =>
      tenantTransaction(dataSource, async (manager) => {
        const joined = await cipher.sealAllJoined(
          manager,
          values.map((value, index) => ({ record: records[index] as { table: string; id: string }, value })),
        );
        expect(Buffer.isBuffer(joined)).toBe(true);
        // As the Brain's insert takes them: one text parameter (sent as bytes), split in SQL.
        const rows: Array<{ text: string }> = await manager.query(`SELECT unnest(string_to_array($1::text, ',')) AS text`, [joined]);
        return rows.map((row) => row.text);
      }),
    );
    expect(texts).toHaveLength(values.length);
    for (const [index, text] of texts.entries()) {
      expect(isSealed(text)).toBe(true);
      await expect(open(tenant, text, records[index])).resolves.toBe(values[index]);
      await expect(open(tenant, text, records[(index + 1) % values.length])).rejects.toBeInstanceOf(DecryptionError);
    }
    // The same form as seal's, under the same key.
    const single = await runWithTenant({ tenantId: tenant }, () =>
      tenantTransaction(dataSource, (manager) => cipher.seal(manager, records[0] as { table: string; id: string }, 'first passage')),
    );
    expect(single.split('.')[1]).toBe(texts[0]?.split('.')[1]);
    expect(single.length).toBe(texts[0]?.length);
    // Nothing to seal: an empty buffer, which splits into no text.
    const none = await runWithTenant({ tenantId: tenant }, () => tenantTransaction(dataSource, (manager) => cipher.sealAllJoined(manager, [])));
    expect(none.length).toBe(0);
  });

  it('leaves no key behind when the transaction that made it rolls back', async () => {
    const tenant = randomUUID();
    const failed = await seal(tenant, { lost: true }, true).catch((error: { sealed: string }) => error.sealed);
    expect(isSealed(failed)).toBe(true);
    expect(await keysOf(tenant)).toBe(0);
    await expect(open(tenant, failed)).rejects.toBeInstanceOf(DecryptionError);
    await seal(tenant, { kept: true });
    expect(await keysOf(tenant)).toBe(1);
  });

  it('refuses a value under another tenant or record, a tampered value, and garbage', async () => {
    const sealed = await seal(tenantA, { secret: 'A only' });
    await expect(open(tenantB, sealed)).rejects.toBeInstanceOf(DecryptionError);
    await expect(open(tenantA, sealed, { table: 'notes', id: 'n-2' })).rejects.toBeInstanceOf(DecryptionError);
    await expect(open(tenantA, sealed, { table: 'other', id: 'n-1' })).rejects.toBeInstanceOf(DecryptionError);
    const body = sealed.slice(sealed.lastIndexOf('.') + 1);
    const flipped = `${sealed.slice(0, sealed.lastIndexOf('.') + 1)}${body.startsWith('A') ? 'B' : 'A'}${body.slice(1)}`;
    await expect(open(tenantA, flipped)).rejects.toBeInstanceOf(DecryptionError);
    for (const garbage of ['', 'plain text', 'enc1.', 'enc1.not-a-uuid.xyz']) await expect(open(tenantA, garbage)).rejects.toBeInstanceOf(DecryptionError);
  });

  it('opens nothing of a key row copied to another tenant', async () => {
    const sealed = await seal(tenantA, { secret: 'A only' });
    const keyId = sealed.split('.')[1];
    const intruder = randomUUID();
    await dataSource.query(`INSERT INTO "${SCHEMA}".data_keys (id, tenant_id, kek_id, wrapped) SELECT $2, $3, kek_id, wrapped FROM "${SCHEMA}".data_keys WHERE id = $1`, [
      keyId,
      randomUUID(),
      intruder,
    ]);
    const forged = sealed.replace(keyId, (await dataSource.query(`SELECT id FROM "${SCHEMA}".data_keys WHERE tenant_id = $1`, [intruder]))[0].id);
    await expect(open(intruder, forged)).rejects.toBeInstanceOf(DecryptionError);
  });
});
