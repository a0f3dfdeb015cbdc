import { CONSOLE_CLIENT_ID, CONSOLE_SCOPES, consoleRedirectUri, Scopes } from '@mission/contracts';
import type { ClientEntity } from '../clients/client.entity';

/** Client metadata in oidc-provider's (RFC 7591) shape. */
export interface OidcClientMetadata {
  readonly client_id: string;
  /**
   * The scrypt hash, never the secret: the provider's `compareClientSecret` is replaced by a
   * hash check, and no feature that needs the plain secret (HMAC algorithms, client_secret_jwt,
   * registration read-back) is enabled.
   */
  readonly client_secret?: string;
  readonly grant_types: readonly string[];
  readonly response_types: readonly string[];
  readonly redirect_uris?: readonly string[];
  readonly post_logout_redirect_uris?: readonly string[];
  /** `none`: a public client (the console, a page in a browser), which holds no secret and proves itself with PKCE alone. */
  readonly token_endpoint_auth_method: 'client_secret_basic' | 'none';
  readonly scope: string;
  readonly tenant_id?: string;
}

export { CONSOLE_CLIENT_ID };

/** Where the approvals console lives, as the idp needs to know it. */
export interface ConsoleClientSettings {
  /** The console's address, ending in `/`: `<gateway>/console/`. */
  readonly url: string;
}

/**
 * The approvals console: a public client (no secret; authorization code with PKCE S256, rotating
 * refresh tokens) without a tenant of its own. Its users name their organisation when they sign
 * in, and their tokens carry the tenant of the user who signed in. It may ask for what the
 * console needs (reading missions, reading and deciding items) and nothing more; a token gets
 * those of them the user holds.
 */
export function consoleClientMetadata(settings: ConsoleClientSettings): OidcClientMetadata {
  return {
    client_id: CONSOLE_CLIENT_ID,
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    redirect_uris: [consoleRedirectUri(settings.url)],
    post_logout_redirect_uris: [settings.url],
    token_endpoint_auth_method: 'none',
    scope: CONSOLE_SCOPES.join(' '),
  };
}

/** Both client_secret_basic and client_secret_post authenticate a client registered as `client_secret_basic`. */
function machineClient(clientId: string, secretHash: string, scopes: readonly string[]): OidcClientMetadata {
  return {
    client_id: clientId,
    client_secret: secretHash,
    grant_types: ['client_credentials'],
    response_types: [],
    token_endpoint_auth_method: 'client_secret_basic',
    scope: scopes.join(' '),
  };
}

/**
 * A tenant's client. With redirect URIs it also signs the tenant's users in: authorization_code
 * (PKCE S256 required by the provider for every client) and rotating refresh tokens.
 */
export function tenantClientMetadata(client: Pick<ClientEntity, 'clientId' | 'secretHash' | 'scopes' | 'tenantId'> & { redirectUris?: readonly string[] }): OidcClientMetadata {
  const machine = { ...machineClient(client.clientId, client.secretHash, client.scopes), tenant_id: client.tenantId };
  if (!client.redirectUris || client.redirectUris.length === 0) return machine;
  return {
    ...machine,
    grant_types: ['client_credentials', 'authorization_code', 'refresh_token'],
    response_types: ['code'],
    redirect_uris: [...client.redirectUris],
    scope: [...client.scopes, 'openid', 'offline_access'].join(' '),
  };
}

export function adminClientMetadata(clientId: string, secretHash: string): OidcClientMetadata {
  return machineClient(clientId, secretHash, [Scopes.platformAdmin]);
}
