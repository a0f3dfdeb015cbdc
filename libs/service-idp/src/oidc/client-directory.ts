import { ClientsRepository } from '../clients/clients.repository';
import { adminClientMetadata, OidcClientMetadata, tenantClientMetadata } from './client-metadata';

/** Where the provider finds a client: the bootstrap operator client (from options, never stored), then the database. */
export class ClientDirectory {
  private readonly admin: OidcClientMetadata;

  constructor(
    private readonly clients: Pick<ClientsRepository, 'findById'>,
    admin: { readonly clientId: string; readonly secretHash: string },
  ) {
    this.admin = adminClientMetadata(admin.clientId, admin.secretHash);
  }

  async find(clientId: string): Promise<OidcClientMetadata | undefined> {
    if (clientId === this.admin.client_id) return this.admin;
    // No client id holds a NUL, and PostgreSQL refuses one in text: such an id is simply unknown (401), not a 500.
    if (clientId.includes('\u0000')) return undefined;
    const client = await this.clients.findById(clientId);
    return client ? tenantClientMetadata(client) : undefined;
  }
}
