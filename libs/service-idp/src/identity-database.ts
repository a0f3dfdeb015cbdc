import { DataSource } from 'typeorm';
import { openServiceDatabase } from '@mission/persistence';
import { ClientEntity } from './clients/client.entity';
import { CreateIdentity1763769600000 } from './migrations/1763769600000-create-identity';
import { TenantEntity } from './tenants/tenant.entity';

export const IDENTITY_SCHEMA = 'identity';

/** The `identity` schema, brought up to date with its migrations. */
export function openIdentityDatabase(url: string): Promise<DataSource> {
  return openServiceDatabase({
    url,
    schema: IDENTITY_SCHEMA,
    entities: [TenantEntity, ClientEntity],
    migrations: [CreateIdentity1763769600000],
    applicationName: 'idp',
  });
}
