import { ClientsRepository } from '../clients/clients.repository';
import { adminClientMetadata, ConsoleClientSettings, consoleClientMetadata, OidcClientMetadata, tenantClientMetadata } from './client-metadata';

/**
 * Where the provider finds a client: the platform's own (the bootstrap operator client and the
 * approvals console, from options, never stored), then the tenants' in the database.
 */
export class ClientDirectory {
  private readonly admin: OidcClientMetadata;
  readonly console: OidcClientMetadata | undefined;

  constructor(
    private readonly clients: Pick<ClientsRepository, 'findById'>,
    admin: { readonly clientId: string; readonly secretHash: string },
    console?: ConsoleClientSettings,
  ) {
    this.admin = adminClientMetadata(admin.clientId, admin.secretHash);
    this.console = console ? consoleClientMetadata(console) : undefined;
  }

  async find(clientId: string): Promise<OidcClientMetadata | undefined> {
    if (clientId === this.admin.client_id) return this.admin;
    if (clientId === this.console?.client_id) return this.console;
    // No client id holds a NUL, and PostgreSQL refuses one in text: such an id is simply unknown (401), not a 500.
    if (clientId.includes('\u0000')) return undefined;
    const client = await this.clients.findById(clientId);
    return client ? tenantClientMetadata(client) : undefined;
  }
}
