import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { DomainError, ErrorCode, type HitView } from '@mission/contracts';
import { KeyEncryptionKey, LocalKeyProvider } from '@mission/crypto';
import { createTestDatabase, RecordCipher, TestDatabase } from '@mission/persistence';
import { runWithTenant } from '@mission/tenant-context';
import { openHitDatabase } from '../hit-service';
import { ExpirySweep } from './expiry-sweep';
import { HitsRepository } from './hits.repository';
import { HitsService } from './hits.service';

const ADMIN_URL = process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Deadlines and assignees of approval items, on PostgreSQL: expiry once, durable, racing decisions. */
describe('HIT item deadlines and assignees', () => {
  let database: TestDatabase;
  let dataSource: DataSource;
  let replicaDataSource: DataSource;
  /** The owner's view of the outbox: what each expiry announced. */
  let owner: Client;
  const cipher = new RecordCipher('hit', new LocalKeyProvider(KeyEncryptionKey.generate()));
  let service: HitsService;
  let replica: HitsService;
  const tenant = randomUUID();
  const as = <T>(tenantId: string, work: () => Promise<T>): Promise<T> => runWithTenant({ tenantId }, work);

  beforeAll(async () => {
    database = await createTestDatabase(ADMIN_URL, 'hit_deadlines');
    dataSource = await openHitDatabase(database.url);
    replicaDataSource = await openHitDatabase(database.url);
    service = new HitsService(dataSource, new HitsRepository(cipher), () => undefined, cipher);
    replica = new HitsService(replicaDataSource, new HitsRepository(cipher), () => undefined, cipher);
    owner = new Client({ connectionString: database.url });
    await owner.connect();
  });

  afterAll(async () => {
    await owner?.end();
    await replicaDataSource?.destroy();
    await dataSource?.destroy();
    await database?.drop();
  });

  const create = (tenantId: string, fields: Record<string, unknown> = {}): Promise<HitView> =>
    as(tenantId, () => service.create({ missionId: randomUUID(), stepIndex: 0, title: 'Go?', ...fields }));

  async function expiredAnnouncements(hitId: string): Promise<number> {
    const { rows } = await owner.query(`SELECT count(*)::int AS n FROM hit.outbox WHERE type = 'hit.expired' AND payload->>'hitId' = $1`, [hitId]);
    return rows[0].n;
  }

  /** Moves an item's deadline into the past, as if time had passed. */
  async function overdue(hitId: string): Promise<void> {
    await owner.query(`UPDATE hit.hit_items SET expires_at = now() - interval '1 second' WHERE id = $1`, [hitId]);
  }

  it('expires each overdue item once when replicas sweep at the same time, announcing hit.expired once', async () => {
    const items = await Promise.all(Array.from({ length: 20 }, () => create(tenant, { expiresIn: 3_600 })));
    const later = await create(tenant, { expiresIn: 3_600 });
    for (const item of items) await overdue(item.id);
    const counts = await Promise.all([service.expireDue(100), replica.expireDue(100), service.expireDue(100), replica.expireDue(100)]);
    expect(counts.reduce((sum, count) => sum + count.expired, 0)).toBe(20);
    for (const item of items) {
      expect((await as(tenant, () => service.get(item.id))).status).toBe('expired');
      expect(await expiredAnnouncements(item.id)).toBe(1);
    }
    // Not due yet: left pending.
    expect((await as(tenant, () => service.get(later.id))).status).toBe('pending');
    expect(await expiredAnnouncements(later.id)).toBe(0);
  });

  it('expires, once it runs, an item whose deadline passed while no sweep ran, within a pass of starting', async () => {
    const item = await create(tenant, { expiresIn: 3_600 });
    await overdue(item.id);
    const errors: unknown[] = [];
    const sweep = new ExpirySweep(service, { intervalMs: 100, onError: (error) => errors.push(error) });
    sweep.start();
    try {
      for (let waited = 0; (await as(tenant, () => service.get(item.id))).status === 'pending' && waited < 5_000; waited += 50) await sleep(50);
    } finally {
      await sweep.stop();
    }
    expect(errors).toEqual([]);
    expect((await as(tenant, () => service.get(item.id))).status).toBe('expired');
    expect(await expiredAnnouncements(item.id)).toBe(1);
  });

  it('gives a decision racing the deadline and the sweep exactly one winner', async () => {
    for (let round = 0; round < 10; round++) {
      const item = await create(tenant, { expiresIn: 3_600 });
      await overdue(item.id);
      const [decided, swept] = await Promise.allSettled([as(tenant, () => service.decide({ id: item.id, decision: 'approved', decidedBy: 'sub' })), replica.expireDue(100)]);
      // Past the deadline, the decision loses whoever takes the row first: 409, and one hit.expired.
      expect(decided.status).toBe('rejected');
      expect(((decided as PromiseRejectedResult).reason as DomainError).code).toBe(ErrorCode.Conflict);
      expect(swept.status).toBe('fulfilled');
      expect((await as(tenant, () => service.get(item.id))).status).toBe('expired');
      expect(await expiredAnnouncements(item.id)).toBe(1);
    }
  });

  it('lets a decision before the deadline win over a later sweep', async () => {
    const item = await create(tenant, { expiresIn: 3_600 });
    await as(tenant, () => service.decide({ id: item.id, decision: 'rejected', decidedBy: 'sub', comment: 'no' }));
    await overdue(item.id);
    expect((await service.expireDue(100)).expired).toBe(0);
    expect((await as(tenant, () => service.get(item.id))).status).toBe('rejected');
    expect(await expiredAnnouncements(item.id)).toBe(0);
  });

  it('lets only an assignee decide, matching names case-insensitively, and lists each user’s items', async () => {
    const assigned = await create(tenant, { assignees: ['ada', 'bob'] });
    const open = await create(tenant);
    const refusal = async (username: string | undefined): Promise<string | undefined> =>
      as(tenant, () => service.decide({ id: assigned.id, decision: 'approved', decidedBy: 'sub', ...(username ? { username } : {}) })).then(
        () => undefined,
        (error: DomainError) => error.code,
      );
    expect(await refusal(undefined)).toBe(ErrorCode.NotAnAssignee);
    expect(await refusal('carol')).toBe(ErrorCode.NotAnAssignee);
    expect(await refusal('BOB')).toBeUndefined();
    // An item without assignees: anyone with the scope, a machine client included.
    await expect(as(tenant, () => service.decide({ id: open.id, decision: 'approved', decidedBy: 'client' }))).resolves.toMatchObject({ status: 'approved' });

    const waiting = await create(tenant, { assignees: ['ada'] });
    const ids = async (assignee?: string): Promise<string[]> =>
      (await as(tenant, () => service.listPending({ limit: 100, ...(assignee ? { assignee } : {}) }))).items.map((item) => item.id);
    expect(await ids('ada')).toContain(waiting.id);
    expect(await ids('Ada')).toContain(waiting.id);
    expect(await ids('bob')).not.toContain(waiting.id);
    // Another tenant's user of the same name sees that tenant's items only.
    const elsewhere = randomUUID();
    const theirs = await create(elsewhere, { assignees: ['ada'] });
    expect((await as(elsewhere, () => service.listPending({ limit: 100, assignee: 'ada' }))).items.map((item) => item.id)).toEqual([theirs.id]);
  });

  it('expires an item whose content cannot be opened, and goes on past an item that fails', async () => {
    const unreadable = await create(tenant, { expiresIn: 3_600 });
    const fine = await create(tenant, { expiresIn: 3_600 });
    await owner.query(`UPDATE hit.hit_items SET sealed = 'not a sealed value' WHERE id = $1`, [unreadable.id]);
    await overdue(unreadable.id);
    await overdue(fine.id);
    await service.expireDue(100);
    expect(await expiredAnnouncements(unreadable.id)).toBe(1);
    expect(await expiredAnnouncements(fine.id)).toBe(1);
    // A pass whose items fail expires the others and reports the failures together.
    const broken = new HitsService(dataSource, new HitsRepository(cipher), () => undefined, cipher);
    const another = await create(tenant, { expiresIn: 3_600 });
    await overdue(another.id);
    const repository = (broken as unknown as { hits: HitsRepository }).hits;
    const lock = repository.lockForExpiry.bind(repository);
    let calls = 0;
    repository.lockForExpiry = async (manager, tenantId, id) => {
      if (calls++ === 0) throw new Error('first item fails');
      return lock(manager, tenantId, id);
    };
    const extra = await create(tenant, { expiresIn: 3_600 });
    await overdue(extra.id);
    await expect(broken.expireDue(100)).rejects.toThrow('1 of 2 approval items past their deadline could not be expired');
    expect((await expiredAnnouncements(another.id)) + (await expiredAnnouncements(extra.id))).toBe(1);
  });

  it('finds due items across tenants only through the function, which returns their ids and nothing else', async () => {
    const other = randomUUID();
    const item = await create(other, { expiresIn: 3_600 });
    await overdue(item.id);
    const due: Array<Record<string, unknown>> = await dataSource.query(`SELECT * FROM hit.due_expiries(100)`);
    expect(due).toContainEqual({ tenant_id: other, id: item.id });
    expect(Object.keys(due[0] ?? {}).sort()).toEqual(['id', 'tenant_id']);
    // The service role itself still reads no row without its tenant.
    expect((await dataSource.query(`SELECT count(*)::int AS n FROM hit.hit_items`))[0].n).toBe(0);
    expect((await service.expireDue(100)).expired).toBeGreaterThanOrEqual(1);
  });
});
