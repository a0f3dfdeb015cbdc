import type { IncomingMessage, ServerResponse } from 'node:http';
import type { DataSource } from 'typeorm';
import { Client, errors, KoaContextWithOIDC, Provider } from 'oidc-provider';
import { isUuid } from '@mission/contracts';
import { ClientsRepository } from '../clients/clients.repository';
import { verifyClientSecret } from '../clients/client-credentials';
import { SIGNING_ALGORITHM, SigningKey } from '../keys/idp-keys';
import { ClientDirectory } from './client-directory';
import { CONSOLE_CLIENT_ID, type ConsoleClientSettings } from './client-metadata';
import type { TenantsRepository } from '../tenants/tenants.repository';
import { signOutPage, messagePage, PAGE_HEADERS } from './login-page';
import type { UsersRepository } from '../users/users.repository';
import { AuthenticationOutcome, AuthenticationThrottle, ThrottleDecision, VerifiedSecrets } from './authentication-throttle';
import { interactionRoutes } from './interactions';
import { createPostgresAdapter } from './postgres-adapter';
import { ACCESS_TOKEN_TTL_SECONDS, decideScopes, REFRESH_TOKEN_TTL_SECONDS, gatewayResourceServer, pinExpiry, SUPPORTED_SCOPES, tenantClaims } from './token-policy';

export interface OidcProviderOptions {
  readonly issuer: string;
  /** The gateway's resource identifier: the audience of every access token. */
  readonly audience: string;
  /** Private signing keys, all published; the first one signs. */
  readonly signingKeys: readonly SigningKey[];
  /** Keys that sign the provider's cookies; the first one signs, all verify. */
  readonly cookieKeys: readonly string[];
  readonly clients: Pick<ClientsRepository, 'findById'>;
  readonly users: Pick<UsersRepository, 'findById' | 'findByUsername'>;
  /** The organisations console users name at sign-in. */
  readonly tenants: Pick<TenantsRepository, 'findByReference'>;
  /** The approvals console, registered as the platform's public client; none when absent. */
  readonly console?: ConsoleClientSettings;
  /** Where sessions, grants, codes and refresh tokens are kept (identity.oidc_artefacts). */
  readonly dataSource: DataSource;
  readonly adminClient: { readonly clientId: string; readonly secretHash: string };
  readonly onServerError: (error: unknown) => void;
  /** Budgets of failed authentications (see AuthenticationThrottle). */
  readonly throttle: AuthenticationThrottle;
  /** Behind a proxy that sets X-Forwarded-For: the caller's address is read from it (the throttle's source budget). */
  readonly trustProxy?: boolean;
  /** Public keys published in the JWKS besides the provider's own (tests only: see test-published-keys). */
  readonly extraPublishedKeys?: ReadonlyArray<Record<string, unknown>>;
}

export type RequestListener = (req: IncomingMessage, res: ServerResponse) => Promise<void>;

/** Where the secret check leaves a refusal for want of budget, for the response to say so. */
const THROTTLED = 'authenticationThrottled';

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
  const directory = new ClientDirectory(options.clients, options.adminClient, options.console);
  const consoleOrigin = options.console ? new URL(options.console.url).origin : undefined;
  const pageHeaders = (ctx: KoaContextWithOIDC): void => {
    for (const [name, value] of Object.entries(PAGE_HEADERS)) ctx.set(name, value);
  };
  const provider = new Provider(options.issuer, {
    adapter: createPostgresAdapter(options.dataSource, directory),
    jwks: structuredClone({ keys: [...options.signingKeys] }),
    cookies: { keys: [...options.cookieKeys] },
    // 'none' is the console's alone (a public client: PKCE instead of a secret); every other client is registered with a secret.
    clientAuthMethods: ['client_secret_basic', 'client_secret_post', 'none'],
    clientDefaults: {
      grant_types: ['client_credentials'],
      response_types: [],
      token_endpoint_auth_method: 'client_secret_basic',
      id_token_signed_response_alg: SIGNING_ALGORITHM,
    },
    enabledJWA: { idTokenSigningAlgValues: [SIGNING_ALGORITHM] },
    // Machine clients call from servers; the one browser origin trusted with the token and
    // revocation endpoints is the console's, for the console's own client.
    clientBasedCORS: (_ctx, origin, client) => client.clientId === CONSOLE_CLIENT_ID && origin === consoleOrigin,
    // The console passes the organisation a link named (`/console/?org=…`) on to the login page.
    extraParams: ['organization'],
    // authorization_code only (no implicit or hybrid flows), PKCE S256 for every client.
    responseTypes: ['code'],
    pkce: { required: () => true },
    scopes: [...SUPPORTED_SCOPES, 'openid', 'offline_access'],
    // Tenant users only; the library's default would invent an account for any `sub`.
    findAccount: async (_ctx, sub) => {
      const user = await options.users.findById(sub);
      return user ? { accountId: user.id, claims: async () => ({ sub: user.id }) } : undefined;
    },
    interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
    // Every refresh rotates; presenting a used one again revokes the whole grant (its family).
    rotateRefreshToken: true,
    extraClientMetadata: {
      properties: ['tenant_id'],
      validator: (_ctx, key, value) => {
        if (key === 'tenant_id' && value !== undefined && !isUuid(value)) throw new errors.InvalidClientMetadata('tenant_id must be a UUID');
      },
    },
    // A person's token also names the user (`username`): the gateway checks an approval's assignees against it.
    // The console has no tenant: its tokens carry the tenant of the user who signed in.
    extraTokenClaims: async (_ctx, token) => {
      const tenant = tenantClaims(token.client);
      const accountId = 'accountId' in token && typeof token.accountId === 'string' ? token.accountId : undefined;
      const isConsole = token.client?.clientId === CONSOLE_CLIENT_ID;
      if ((!tenant && !isConsole) || accountId === undefined) return tenant;
      const user = await options.users.findById(accountId);
      if (!user) return tenant;
      if (isConsole) return { tenant_id: user.tenantId, username: user.username };
      return user.tenantId === tenant?.tenant_id ? { ...tenant, username: user.username } : tenant;
    },
    // Errors of browser-facing endpoints as JSON, like the token endpoint's, rather than an HTML page.
    renderError: async (ctx, out) => {
      ctx.type = 'application/json';
      ctx.body = out;
    },
    formats: { customizers: { jwt: (_ctx, _token, jwt) => pinExpiry(jwt.payload) } },
    ttl: {
      ClientCredentials: ACCESS_TOKEN_TTL_SECONDS,
      AccessToken: ACCESS_TOKEN_TTL_SECONDS,
      AuthorizationCode: 60,
      Interaction: 10 * 60,
      Session: 24 * 3600,
      Grant: REFRESH_TOKEN_TTL_SECONDS,
      RefreshToken: REFRESH_TOKEN_TTL_SECONDS,
    },
    features: {
      // client_credentials is registered below with this platform's scope defaults.
      clientCredentials: { enabled: false },
      revocation: { enabled: true },
      introspection: { enabled: false },
      registration: { enabled: false },
      devInteractions: { enabled: false },
      dPoP: { enabled: false },
      pushedAuthorizationRequests: { enabled: false },
      // Signing out of the console ends the idp session too (after the user confirms, on the idp's own page).
      rpInitiatedLogout: {
        enabled: options.console !== undefined,
        logoutSource: async (ctx: KoaContextWithOIDC, form: string) => {
          pageHeaders(ctx);
          ctx.body = signOutPage(form);
        },
        postLogoutSuccessSource: async (ctx: KoaContextWithOIDC) => {
          pageHeaders(ctx);
          ctx.body = messagePage('Signed out', 'You are signed out of Mission Service on this browser.');
        },
      },
      userinfo: { enabled: false },
      // The library's own flows resolve audiences through this too (a request without `resource` gets the gateway).
      resourceIndicators: {
        enabled: true,
        defaultResource: async () => audience,
        getResourceServerInfo: async (_ctx: unknown, resource: string) => resourceServerFor(resource),
      },
    },
  });

  // Behind a load balancer every caller would have its address: the source budget would be one for all.
  // One proxy is trusted: the caller is the last address in X-Forwarded-For (the one it appended);
  // addresses before it are whatever the caller claimed, and would let it pick its own budget.
  if (options.trustProxy) {
    provider.proxy = true;
    provider.maxIpsCount = 1;
  }

  // Secrets are stored as scrypt hashes, so the provider's plain comparison is replaced by a hash
  // check. The maintainers keep this method public for exactly this (it is awaited on every
  // client_secret_basic / client_secret_post authentication: token, revocation).
  //
  // A secret verified lately is accepted again without scrypt. Otherwise the attempt is counted
  // before scrypt runs, and a client or source over its budget, or a process already verifying as
  // much as it takes, is refused without scrypt (429 with Retry-After below).
  const verified = new VerifiedSecrets();
  /** Checks running now, by what they check: the same credentials sent side by side are checked (and counted) once. */
  const checking = new Map<string, Promise<AuthenticationOutcome>>();
  provider.Client.prototype.compareClientSecret = async function compareClientSecret(this: Client, presented: string) {
    const stored = this.clientSecret;
    if (!stored) return false;
    if (verified.has(this.clientId, stored, presented)) return true;
    const ctx = Provider.ctx;
    const key = verified.fingerprint(this.clientId, stored, presented);
    let pending = checking.get(key);
    if (!pending) {
      pending = options.throttle.authenticate('client', this.clientId, ctx?.ip, () => verifyClientSecret(presented, stored)).finally(() => checking.delete(key));
      checking.set(key, pending);
    }
    const outcome = await pending;
    if (outcome.refused) {
      if (ctx) ctx.state[THROTTLED] = outcome.refused;
      return false;
    }
    if (outcome.valid) verified.remember(this.clientId, stored, presented);
    return outcome.valid;
  };
  provider.use(async (ctx, next) => {
    await next();
    const throttled = ctx.state[THROTTLED] as ThrottleDecision | undefined;
    if (!throttled || ctx.status !== 401) return;
    ctx.status = 429;
    ctx.set('Retry-After', String(throttled.retryAfterSeconds));
    ctx.body = { error: 'invalid_client', error_description: `too many authentication attempts; retry after ${throttled.retryAfterSeconds} s` };
  });

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

  provider.use(interactionRoutes({ provider, clients: directory, users: options.users, tenants: options.tenants, audience, throttle: options.throttle }));

  const extraKeys = options.extraPublishedKeys ?? [];
  if (extraKeys.length > 0) {
    provider.use(async (ctx, next) => {
      await next();
      const body = ctx.body as { keys?: unknown[] } | undefined;
      if (ctx.path === '/jwks' && ctx.status === 200 && Array.isArray(body?.keys)) ctx.body = { keys: [...body.keys, ...extraKeys] };
    });
  }

  provider.on('server_error', (_ctx, error) => options.onServerError(error));
  return provider.callback();
}
