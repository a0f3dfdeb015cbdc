import { randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import { CreatedTenantView, CreateTenantRequest, DomainError, rpmFor, TENANT_SCOPES, TenantView } from '@mission/contracts';
import { ClientEntity } from '../clients/client.entity';
import { generateClientId, generateClientSecret, hashClientSecret } from '../clients/client-credentials';
import { ClientsRepository } from '../clients/clients.repository';
import { TenantEntity } from './tenant.entity';
import { TenantsRepository } from './tenants.repository';

export function toTenantView(tenant: TenantEntity): TenantView {
  return {
    id: tenant.id,
    name: tenant.name,
    tier: tenant.tier,
    rpm: rpmFor(tenant.tier, tenant.rpm),
    createdAt: tenant.createdAt.toISOString(),
  };
}

/** Provisioning: tenants and their machine clients. */
export class TenantsService {
  constructor(
    private readonly dataSource: DataSource,
    private readonly tenants: TenantsRepository,
    private readonly clients: ClientsRepository,
    private readonly now: () => Date = () => new Date(),
  ) {}

  /**
   * Creates the tenant and its first client (all tenant scopes) together, so a tenant never
   * exists without a way to call the API. The client secret is returned here and only here.
   */
  async create(request: CreateTenantRequest): Promise<CreatedTenantView> {
    const createdAt = this.now();
    const tenant: TenantEntity = {
      id: randomUUID(),
      name: request.name,
      tier: request.tier,
      rpm: request.tier === 'enterprise' ? (request.rpm ?? null) : null,
      createdAt,
    };
    const clientSecret = generateClientSecret();
    const client: ClientEntity = {
      clientId: generateClientId(),
      tenantId: tenant.id,
      secretHash: await hashClientSecret(clientSecret),
      scopes: [...TENANT_SCOPES],
      createdAt,
    };
    await this.dataSource.transaction(async (manager) => {
      await this.tenants.insert(manager, tenant);
      await this.clients.insert(manager, client);
    });
    return { ...toTenantView(tenant), client: { clientId: client.clientId, clientSecret, scopes: [...TENANT_SCOPES] } };
  }

  async get(id: string): Promise<TenantView> {
    const tenant = await this.tenants.findById(id);
    if (!tenant) throw DomainError.notFound('Tenant');
    return toTenantView(tenant);
  }
}
