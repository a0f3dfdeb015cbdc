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
}
