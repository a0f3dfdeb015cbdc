import { randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import {
  ClientCredentialsView,
  CreateClientRequest,
  CreatedTenantView,
  CreateTenantRequest,
  CreateUserCommand,
  DomainError,
  ErrorCode,
  isUuid,
  rpmFor,
  storageFor,
  TENANT_SCOPES,
  TenantScope,
  TenantView,
  UpdateTenantRequest,
  UserView,
} from '@mission/contracts';
import { isSecretHash } from '@mission/crypto';
import { ClientEntity } from '../clients/client.entity';
import { generateClientId, generateClientSecret, hashClientSecret } from '../clients/client-credentials';
import { ClientsRepository } from '../clients/clients.repository';
import { UserEntity } from '../users/user.entity';
import { UsersRepository } from '../users/users.repository';
import { TenantEntity } from './tenant.entity';
import { TenantsRepository } from './tenants.repository';

export function toTenantView(tenant: TenantEntity): TenantView {
  return {
    id: tenant.id,
    name: tenant.name,
    tier: tenant.tier,
    rpm: rpmFor(tenant.tier, tenant.rpm),
    storage: storageFor(tenant.tier, { documents: tenant.storageDocuments, bytes: tenant.storageBytes }),
    createdAt: tenant.createdAt.toISOString(),
  };
}

function toUserView(user: UserEntity): UserView {
  return { id: user.id, tenantId: user.tenantId, username: user.username, scopes: user.scopes as TenantScope[], createdAt: user.createdAt.toISOString() };
}

function rpmError(message: string): DomainError {
  return new DomainError(ErrorCode.ValidationFailed, 'Tenant is invalid', [{ field: 'rpm', message }]);
}

/** Provisioning (the operator API): tenants, their machine and sign-in clients, and their users. */
export class TenantsService {
  constructor(
    private readonly dataSource: DataSource,
    private readonly tenants: TenantsRepository,
    private readonly clients: ClientsRepository,
    private readonly users: UsersRepository = new UsersRepository(dataSource),
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
      storageDocuments: request.tier === 'enterprise' ? (request.storage?.documents ?? null) : null,
      storageBytes: request.tier === 'enterprise' ? (request.storage?.bytes ?? null) : null,
      createdAt,
    };
    const { entity, view } = await this.newClient(tenant.id, {}, createdAt);
    await this.dataSource.transaction(async (manager) => {
      await this.tenants.insert(manager, tenant);
      await this.clients.insert(manager, entity);
    });
    return { ...toTenantView(tenant), client: view };
  }

  async get(id: string): Promise<TenantView> {
    const tenant = await this.tenants.findById(id);
    if (!tenant) throw DomainError.notFound('Tenant');
    return toTenantView(tenant);
  }

  /**
   * Changes the tier and/or the enterprise limit. The result obeys the creation rules: an
   * enterprise tenant has its own rpm (kept from before when the patch gives none), any other
   * tier has none. The gateway reads the new limit through `identity.tenant.get` within seconds.
   */
  async update(id: string, patch: UpdateTenantRequest): Promise<TenantView> {
    if (!isUuid(id)) throw DomainError.notFound('Tenant');
    const updated = await this.dataSource.transaction(async (manager) => {
      const tenant = await this.tenants.lockById(manager, id);
      if (!tenant) throw DomainError.notFound('Tenant');
      const tier = patch.tier ?? tenant.tier;
      if (tier !== 'enterprise' && patch.rpm !== undefined) throw rpmError('rpm can only be set for the enterprise tier');
      const rpm = tier === 'enterprise' ? (patch.rpm ?? tenant.rpm) : null;
      if (tier === 'enterprise' && rpm === null) throw rpmError('rpm is required for the enterprise tier');
      if (tier !== 'enterprise' && patch.storage !== undefined) {
        throw new DomainError(ErrorCode.ValidationFailed, 'Tenant is invalid', [{ field: 'storage', message: 'storage can only be set for the enterprise tier' }]);
      }
      // An enterprise tenant keeps its own quota unless the patch changes it; another tier has its tier's.
      const storageDocuments = tier === 'enterprise' ? (patch.storage?.documents ?? tenant.storageDocuments) : null;
      const storageBytes = tier === 'enterprise' ? (patch.storage?.bytes ?? tenant.storageBytes) : null;
      const next: TenantEntity = { ...tenant, tier, rpm, storageDocuments, storageBytes };
      await this.tenants.updateLimits(manager, next);
      return next;
    });
    return toTenantView(updated);
  }

  /** Another client of an existing tenant, with all tenant scopes or the given subset. The secret is shown once. */
  async createClient(tenantId: string, request: CreateClientRequest): Promise<ClientCredentialsView> {
    await this.get(tenantId);
    const { entity, view } = await this.newClient(tenantId.toLowerCase(), request, this.now());
    await this.clients.insert(this.dataSource.manager, entity);
    return view;
  }

  /**
   * Which of `usernames` the tenant has no user of, or has one who may not decide approvals (no
   * `hits:approve`): an approval step's assignees are checked against it.
   */
  async unknownUsers(tenantId: string, usernames: readonly string[]): Promise<{ unknown: string[]; unableToApprove: string[] }> {
    return this.users.assignable(tenantId, usernames);
  }

  /**
   * A user of the tenant, who signs in through the tenant's sign-in clients. The password arrives
   * hashed (see CreateUserCommandSchema). 409 when the name is taken.
   */
  async createUser(tenantId: string, request: Omit<CreateUserCommand, 'tenantId'>): Promise<UserView> {
    if (!isSecretHash(request.passwordHash)) {
      throw new DomainError(ErrorCode.ValidationFailed, 'User is invalid', [{ field: 'passwordHash', message: 'not a password hash' }]);
    }
    await this.get(tenantId);
    const user: UserEntity = {
      id: randomUUID(),
      tenantId: tenantId.toLowerCase(),
      username: request.username.toLowerCase(),
      passwordHash: request.passwordHash,
      scopes: [...(request.scopes ?? TENANT_SCOPES)],
      createdAt: this.now(),
    };
    if (!(await this.users.insert(user))) throw new DomainError(ErrorCode.Conflict, 'The tenant already has a user with this username');
    return toUserView(user);
  }

  private async newClient(tenantId: string, request: CreateClientRequest, createdAt: Date): Promise<{ entity: ClientEntity; view: ClientCredentialsView }> {
    const clientSecret = generateClientSecret();
    const scopes = [...(request.scopes ?? TENANT_SCOPES)];
    const entity: ClientEntity = {
      clientId: generateClientId(),
      tenantId,
      secretHash: await hashClientSecret(clientSecret),
      scopes,
      redirectUris: [...(request.redirectUris ?? [])],
      createdAt,
    };
    const view: ClientCredentialsView = { clientId: entity.clientId, clientSecret, scopes, ...(request.redirectUris ? { redirectUris: [...request.redirectUris] } : {}) };
    return { entity, view };
  }
}
