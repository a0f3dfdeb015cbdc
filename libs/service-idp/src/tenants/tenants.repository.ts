import { DataSource, EntityManager } from 'typeorm';
import { isUuid } from '@mission/contracts';
import { TenantEntity } from './tenant.entity';

/** The only code that reads or writes tenants. Tenants are operator data: not tenant-scoped. */
export class TenantsRepository {
  constructor(private readonly dataSource: DataSource) {}

  async insert(manager: EntityManager, tenant: TenantEntity): Promise<void> {
    await manager.insert(TenantEntity, tenant);
  }

  /** A malformed id cannot exist, so it is simply not found (no query). */
  async findById(id: string): Promise<TenantEntity | null> {
    if (!isUuid(id)) return null;
    return this.dataSource.getRepository(TenantEntity).findOne({ where: { id } });
  }

  /** The tenant, locked for the rest of the transaction so concurrent changes apply one after the other. */
  async lockById(manager: EntityManager, id: string): Promise<TenantEntity | null> {
    if (!isUuid(id)) return null;
    return manager.findOne(TenantEntity, { where: { id }, lock: { mode: 'pessimistic_write' } });
  }

  async updateLimits(manager: EntityManager, tenant: Pick<TenantEntity, 'id' | 'tier' | 'rpm' | 'storageDocuments' | 'storageBytes'>): Promise<void> {
    await manager.update(TenantEntity, { id: tenant.id }, { tier: tenant.tier, rpm: tenant.rpm, storageDocuments: tenant.storageDocuments, storageBytes: tenant.storageBytes });
  }
}
