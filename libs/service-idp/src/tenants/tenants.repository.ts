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

  /**
   * The tenant a person names when signing in: by id, or by name (case-insensitive) when exactly
   * one tenant has it. An unknown or ambiguous name is not found.
   */
  async findByReference(reference: string): Promise<TenantEntity | null> {
    const named: string = reference.trim();
    if (isUuid(named.toLowerCase())) return this.findById(named.toLowerCase());
    if (named.length === 0 || named.length > 200 || named.includes('\u0000')) return null;
    const matches = await this.dataSource.getRepository(TenantEntity).createQueryBuilder('tenant').where('lower(tenant.name) = lower(:name)', { name: named }).limit(2).getMany();
    return matches.length === 1 ? (matches[0] ?? null) : null;
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
