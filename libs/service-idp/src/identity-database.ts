import { DataSource } from 'typeorm';
import { openServiceDatabase } from '@mission/persistence';
import { ClientEntity } from './clients/client.entity';
import { CreateIdentity1763769600000 } from './migrations/1763769600000-create-identity';
import { CreateUsers1764460800000 } from './migrations/1764460800000-create-users';
import { CreateOidcStore1764633600000 } from './migrations/1764633600000-create-oidc-store';
import { TenantStorageQuota1766793600000 } from './migrations/1766793600000-tenant-storage-quota';
import { CreateSigningKeys1764806400000 } from './migrations/1764806400000-create-signing-keys';
import { TenantEntity } from './tenants/tenant.entity';
import { UserEntity } from './users/user.entity';

export const IDENTITY_SCHEMA = 'identity';

/** The `identity` schema, brought up to date with its migrations. */
export function openIdentityDatabase(url: string): Promise<DataSource> {
  return openServiceDatabase({
    url,
    schema: IDENTITY_SCHEMA,
    entities: [TenantEntity, ClientEntity, UserEntity],
    migrations: [CreateIdentity1763769600000, CreateUsers1764460800000, CreateOidcStore1764633600000, CreateSigningKeys1764806400000, TenantStorageQuota1766793600000],
    applicationName: 'idp',
  });
}
