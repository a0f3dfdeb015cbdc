import { randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import { HitView } from '@mission/contracts';
import { KeyEncryptionKey, LocalKeyProvider } from '@mission/crypto';
import { createTestDatabase, RecordCipher, TestDatabase, tenantTransaction } from '@mission/persistence';
import { runWithTenant } from '@mission/tenant-context';
import { openHitDatabase } from '../hit-service';
import { HitsRepository } from './hits.repository';
import { HitsService } from './hits.service';

const ADMIN_URL = process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

describe('HIT items under row-level security', () => {
  let database: TestDatabase;
  let dataSource: DataSource;
  const cipher = new RecordCipher('hit', new LocalKeyProvider(KeyEncryptionKey.generate()));
  const repository = new HitsRepository(cipher);
  const tenantA = randomUUID();
  const tenantB = randomUUID();
  let itemA: HitView;
  let itemB: HitView;

  beforeAll(async () => {
    database = await createTestDatabase(ADMIN_URL, 'hit_rls');
    dataSource = await openHitDatabase(database.url);
    const service = new HitsService(dataSource, repository, () => undefined, cipher);
    itemA = await runWithTenant({ tenantId: tenantA }, () => service.create({ missionId: randomUUID(), stepIndex: 0, title: 'A' }));
    itemB = await runWithTenant({ tenantId: tenantB }, () => service.create({ missionId: randomUUID(), stepIndex: 0, title: 'B' }));
  });

  afterAll(async () => {
    await dataSource?.destroy();
    await database?.drop();
  });

  it('shows a query without a tenant set zero rows, even through the repository', async () => {
    const [row] = await dataSource.query(`SELECT count(*)::int AS n FROM hit.hit_items`);
    expect(row.n).toBe(0);
    await expect(repository.find(dataSource.manager, tenantA, itemA.id)).resolves.toBeNull();
    await expect(repository.pendingPage(dataSource.manager, tenantA, 10)).resolves.toEqual([]);
  });

  it('never shows tenant A’s transaction a row of tenant B, nor lets it decide one', async () => {
    await runWithTenant({ tenantId: tenantA }, () =>
      tenantTransaction(dataSource, async (manager) => {
        expect((await manager.query(`SELECT id FROM hit.hit_items`)).map((r: { id: string }) => r.id)).toEqual([itemA.id]);
        await expect(repository.lock(manager, tenantB, itemB.id)).resolves.toBeNull();
        const updated = await manager.query(`UPDATE hit.hit_items SET status = 'approved' WHERE id = $1`, [itemB.id]);
        expect(updated[1]).toBe(0);
      }),
    );
  });

  it('lets the service add data keys but never delete one', async () => {
    const [row] = await dataSource.query(`SELECT count(*)::int AS n FROM hit.data_keys`);
    expect(row.n).toBe(2);
    await expect(dataSource.query(`DELETE FROM hit.data_keys`)).rejects.toThrow(/permission denied/);
    await expect(dataSource.query(`TRUNCATE hit.data_keys`)).rejects.toThrow(/permission denied/);
    expect((await dataSource.query(`SELECT count(*)::int AS n FROM hit.data_keys`))[0].n).toBe(2);
  });
});
