import type { IncomingMessage, ServerResponse } from 'node:http';
import { AdapterPayload, Client, errors, KoaContextWithOIDC, Provider } from 'oidc-provider';
import { isUuid } from '@mission/contracts';
import { ClientsRepository } from '../clients/clients.repository';
import { verifyClientSecret } from '../clients/client-credentials';
import { IdpKeys, SIGNING_ALGORITHM } from '../keys/idp-keys';
import { ClientDirectory } from './client-directory';
import { ExpiringStore } from './expiring-store';
import { createOidcAdapter, DEFAULT_MAX_STORED_ARTEFACTS } from './oidc-adapter';
import { ACCESS_TOKEN_TTL_SECONDS, decideScopes, gatewayResourceServer, pinExpiry, SUPPORTED_SCOPES, tenantClaims } from './token-policy';

export interface OidcProviderOptions {
  readonly issuer: string;
  /** The gateway's resource identifier: the audience of every access token. */
  readonly audience: string;
  readonly keys: IdpKeys;
  readonly clients: Pick<ClientsRepository, 'findById'>;
  readonly adminClient: { readonly clientId: string; readonly secretHash: string };
  readonly onServerError: (error: unknown) => void;
}

export type RequestListener = (req: IncomingMessage, res: ServerResponse) => Promise<void>;

function scopesOf(client: Client): string[] {
  return (client.scope ?? '').split(' ').filter(Boolean);
}

/**
 * The OAuth 2.0 authorization server, on oidc-provider. The only module that imports it: the
 * package is ESM-only, which the rest of the app (and Jest) loads through CommonJS.
 */
export function createOidcProvider(options: OidcProviderOptions): RequestListener {
  const { audience } = options;
  const gateway = gatewayResourceServer(audience);
  // The gateway is the only resource server: a token for anything else is refused.
  const resourceServerFor = (resource: unknown): typeof gateway => {
    if (resource !== audience) throw new errors.InvalidTarget();
    return gateway;
  };
  const directory = new ClientDirectory(options.clients, options.adminClient);
  const store = new ExpiringStore<AdapterPayload>(DEFAULT_MAX_STORED_ARTEFACTS);

  const provider = new Provider(options.issuer, {
    adapter: createOidcAdapter(directory, store),
    jwks: structuredClone({ keys: [...options.keys.jwks.keys] }),
    cookies: { keys: [...options.keys.cookieKeys] },
    clientAuthMethods: ['client_secret_basic', 'client_secret_post'],
    clientDefaults: {
      grant_types: ['client_credentials'],
      response_types: [],
      token_endpoint_auth_method: 'client_secret_basic',
      id_token_signed_response_alg: SIGNING_ALGORITHM,
    },
    enabledJWA: { idTokenSigningAlgValues: [SIGNING_ALGORITHM] },
    // Machine clients call from servers; no browser origin is trusted with the token endpoint.
    clientBasedCORS: () => false,
    // No authorization endpoint flows yet (authorization_code + PKCE comes with end-user login).
    responseTypes: [],
    scopes: [...SUPPORTED_SCOPES],
    // There are no end-user accounts yet; the library's default would invent one for any `sub`.
    findAccount: async () => undefined,
    extraClientMetadata: {
      properties: ['tenant_id'],
      validator: (_ctx, key, value) => {
        if (key === 'tenant_id' && value !== undefined && !isUuid(value)) throw new errors.InvalidClientMetadata('tenant_id must be a UUID');
      },
    },
    extraTokenClaims: async (_ctx, token) => tenantClaims(token.client),
    // Errors of browser-facing endpoints as JSON, like the token endpoint's, rather than an HTML page.
    renderError: async (ctx, out) => {
      ctx.type = 'application/json';
      ctx.body = out;
    },
    formats: { customizers: { jwt: (_ctx, _token, jwt) => pinExpiry(jwt.payload) } },
    ttl: { ClientCredentials: ACCESS_TOKEN_TTL_SECONDS, AccessToken: ACCESS_TOKEN_TTL_SECONDS },
    features: {
      // client_credentials is registered below with this platform's scope defaults.
      clientCredentials: { enabled: false },
      revocation: { enabled: true },
      introspection: { enabled: false },
      registration: { enabled: false },
      devInteractions: { enabled: false },
      dPoP: { enabled: false },
      pushedAuthorizationRequests: { enabled: false },
      rpInitiatedLogout: { enabled: false },
      userinfo: { enabled: false },
      // The library's own flows resolve audiences through this too (a request without `resource` gets the gateway).
      resourceIndicators: {
        enabled: true,
        defaultResource: async () => audience,
        getResourceServerInfo: async (_ctx: unknown, resource: string) => resourceServerFor(resource),
      },
    },
  });

  // Secrets are stored as scrypt hashes, so the provider's plain comparison is replaced by a hash
  // check. The maintainers keep this method public for exactly this (it is awaited on every
  // client_secret_basic / client_secret_post authentication: token, revocation).
  provider.Client.prototype.compareClientSecret = function compareClientSecret(this: Client, presented: string) {
    return verifyClientSecret(presented, this.clientSecret);
  };

  // The built-in grant gives a client that names no scope a token without any; here it gets all of
  // its scopes, and a scope it does not hold is refused. Authentication, token format, signing and
  // error responses stay the library's.
  provider.registerGrantType(
    'client_credentials',
    async (ctx: KoaContextWithOIDC) => {
      const client = ctx.oidc.client;
      if (!client) throw new Error('client_credentials reached without an authenticated client');
      const decision = decideScopes(ctx.oidc.params?.scope, scopesOf(client));
      if (!decision.ok) throw new errors.InvalidScope('requested scope is not allowed', decision.rejected);
      const resourceServer = resourceServerFor(ctx.oidc.params?.resource ?? audience);

      const token = new provider.ClientCredentials({ client, scope: decision.scopes.join(' ') });
      token.resourceServer = new provider.ResourceServer(audience, resourceServer);
      ctx.oidc.entity('ClientCredentials', token);
      const accessToken = await token.save();
      ctx.body = { access_token: accessToken, expires_in: token.expiration, token_type: token.tokenType, scope: token.scope };
    },
    ['scope', 'resource'],
  );

  provider.on('server_error', (_ctx, error) => options.onServerError(error));
  return provider.callback();
}
