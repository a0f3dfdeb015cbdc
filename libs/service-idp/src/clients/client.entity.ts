import { Column, Entity, PrimaryColumn } from 'typeorm';

/** A tenant's OAuth client. The secret exists only as an scrypt hash. */
@Entity('clients')
export class ClientEntity {
  @PrimaryColumn('text', { name: 'client_id' })
  clientId!: string;

  @Column('uuid', { name: 'tenant_id' })
  tenantId!: string;

  @Column('text', { name: 'secret_hash' })
  secretHash!: string;

  @Column('text', { array: true })
  scopes!: string[];

  /** Empty for a machine client; a client with redirect URIs may also sign users in. */
  @Column('text', { name: 'redirect_uris', array: true, default: () => "'{}'" })
  redirectUris!: string[];

  @Column('timestamptz', { name: 'created_at' })
  createdAt!: Date;
}
