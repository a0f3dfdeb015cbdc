import path from 'node:path';
import { DataSource } from 'typeorm';
import type { Registry } from 'prom-client';
import { ConsumerGroups, DomainError, ErrorCode, SigningKeyRotationView, Topics } from '@mission/contracts';
import { KeyEncryptionKey } from '@mission/crypto';
import { MessageBus } from '@mission/messaging';
import { pingDatabase } from '@mission/persistence';
import { databaseMetrics } from '@mission/runtime';
import { hashClientSecret } from './clients/client-credentials';
import { ClientsRepository } from './clients/clients.repository';
import { closeServer, createIdpServer, listen } from './http/idp-server';
import { IDENTITY_SCHEMA, openIdentityDatabase } from './identity-database';
import { sweepExpired } from './oidc/postgres-adapter';
import type { ConsoleClientSettings } from './oidc/client-metadata';
import { loadCookieKeys, readLegacySigningKeys, removeLegacySigningKeys } from './keys/idp-keys';
import { DEFAULT_ROTATION_POLICY } from './keys/key-rotation';
import { SigningKeySet, SigningKeyStore } from './keys/signing-key-store';
import type { PublishedPublicKey } from './keys/test-published-keys';
import { identityRequestHandlers } from './tenants/tenants.handlers';
import { TenantsRepository } from './tenants/tenants.repository';
import { TenantsService } from './tenants/tenants.service';
import { UsersRepository } from './users/users.repository';
import { AuthenticationThrottle } from './oidc/authentication-throttle';
import { createRateLimiter, type RateLimiter } from '@mission/rate-limit';

export const IDP_GROUP = ConsumerGroups.idp;

/** Requests in flight get this long to finish when the idp stops. */
const SHUTDOWN_GRACE_MS = 10_000;
const ARTEFACT_SWEEP_INTERVAL_MS = 10 * 60_000;
/** Every replica re-reads the signing keys this often (and at each planned transition). */
const KEY_RELOAD_INTERVAL_MS = 30_000;

export interface IdpLogger {
  info(message: string, context?: Record<string, unknown>): void;
  warn(message: string, context?: Record<string, unknown>): void;
  error(message: string, context?: Record<string, unknown>): void;
}

const consoleIdpLogger: IdpLogger = {
  info: (message, context) => console.log(JSON.stringify({ level: 'info', service: 'idp', msg: message, ...context })),
  warn: (message, context) => console.warn(JSON.stringify({ level: 'warn', service: 'idp', msg: message, ...context })),
  error: (message, context) => console.error(JSON.stringify({ level: 'error', service: 'idp', msg: message, ...context })),
};

export interface IdpOptions {
  /** Issuer identifier, an origin without path, e.g. http://127.0.0.1:3001. */
  readonly issuer: string;
  readonly host: string;
  /** 0 picks a free port (see IdpHandle.url). */
  readonly port: number;
  /** The gateway's resource identifier, e.g. http://127.0.0.1:3000: the audience of every access token. */
  readonly audience: string;
  readonly databaseUrl: string;
  /** Not started yet: the idp registers its handlers, the caller starts the bus. */
  readonly bus: MessageBus;
  /** Cookie keys are kept under `<dataDir>/idp` (signing keys live in the database). */
  readonly dataDir: string;
  /** Base64url of the 32-byte AES-256-GCM key that encrypts the signing keys in the database. */
  readonly keyEncryptionKey: string;
  /** From a rotation to the new key's first signature (default: the gateway's 10 min JWKS cache age). */
  readonly keyPublishDelayMs?: number;
  /** The bootstrap operator client (scope platform:admin). Held in memory only, as a hash. */
  readonly adminClient: { readonly clientId: string; readonly clientSecret: string };
  readonly logger?: IdpLogger;
  /** Where the idp's metrics go (HTTP requests by route, database pool); served on the operations port's `/metrics`. */
  readonly metrics?: Registry;
  /** Tests only (parseTestPublishedKeys): extra public keys in the JWKS. */
  readonly testPublishedKeys?: readonly PublishedPublicKey[];
  /** HTTPS with this certificate chain and key (PEM); required when the issuer is https://. */
  readonly tls?: { readonly cert: string; readonly key: string };
  /** Trust X-Forwarded-For from a proxy in front (TRUST_PROXY): the address failed authentications are counted by. */
  readonly trustProxy?: boolean;
  /** Redis for the budgets of failed authentications, shared by every idp replica (REDIS_URL); in memory without it. */
  readonly redisUrl?: string;
  readonly redisTlsCa?: string;
  /** The approvals console, registered as the platform's public client (`mission-console`); none when absent. */
  readonly console?: ConsoleClientSettings;
}

export interface IdpHandle {
  /** Where the idp listens (the issuer may differ, e.g. behind a proxy). */
  readonly url: string;
  /** Stops HTTP, then closes the database. Close the bus first: its handlers use the database. */
  stop(): Promise<void>;
  ready(): Promise<{ up: boolean; details: Record<string, unknown> }>;
}

function assertIssuer(issuer: string): void {
  const url = URL.parse(issuer);
  if (!url || !/^https?:$/.test(url.protocol) || url.pathname !== '/' || url.search || url.hash || issuer.endsWith('/')) {
    throw new Error(`The issuer must be an http(s) origin without path, query or trailing slash, got ${JSON.stringify(issuer)}`);
  }
}

function assertAudience(audience: string): void {
  const url = URL.parse(audience);
  if (!url || url.hash) throw new Error(`The audience must be an absolute URI without fragment, got ${JSON.stringify(audience)}`);
}

function urlOf(host: string, port: number, scheme: 'http' | 'https'): string {
  const reachable = host === '0.0.0.0' || host === '::' || host === '' ? '127.0.0.1' : host;
  return `${scheme}://${reachable.includes(':') ? `[${reachable}]` : reachable}:${port}`;
}

/**
 * Starts the identity provider: the OAuth 2.0 token endpoint with its discovery and JWKS, the
 * tenant provisioning handlers on the bus, and health checks, on one HTTP server.
 */
export async function startIdp(options: IdpOptions): Promise<IdpHandle> {
  assertIssuer(options.issuer);
  assertAudience(options.audience);
  const logger = options.logger ?? consoleIdpLogger;

  const kek = KeyEncryptionKey.fromBase64Url(options.keyEncryptionKey);
  const cookieKeys = await loadCookieKeys(options.dataDir);
  if (cookieKeys.created) logger.info('Generated identity provider cookie keys', { directory: path.join(options.dataDir, 'idp') });

  const dataSource: DataSource = await openIdentityDatabase(options.databaseUrl);
  let keyTimer: NodeJS.Timeout | undefined;
  let authenticationLimiter: RateLimiter | undefined;
  try {
    const keyStore = new SigningKeyStore(dataSource, kek, { ...DEFAULT_ROTATION_POLICY, publishDelayMs: options.keyPublishDelayMs ?? DEFAULT_ROTATION_POLICY.publishDelayMs });
    // Keys of the plain file an earlier version kept are imported once, then the file goes.
    const legacy = await readLegacySigningKeys(options.dataDir);
    const initialized = await keyStore.initialize(legacy);
    if (initialized !== 'existing') logger.info(initialized === 'imported' ? 'Imported the signing keys into the database' : 'Generated the first signing key');
    if (legacy) await removeLegacySigningKeys(options.dataDir);

    const clients = new ClientsRepository(dataSource);
    const tenantsRepository = new TenantsRepository(dataSource);
    const tenants = new TenantsService(dataSource, tenantsRepository, clients);
    // Loaded on start only: oidc-provider is an ES module, which keeps this library's other
    // exports (config schema, credentials) loadable by CommonJS tooling such as Jest.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { createOidcProvider } = require('./oidc/provider') as typeof import('./oidc/provider');
    const users = new UsersRepository(dataSource);
    const adminClient = { clientId: options.adminClient.clientId, secretHash: await hashClientSecret(options.adminClient.clientSecret) };
    authenticationLimiter = createRateLimiter({
      redisUrl: options.redisUrl,
      redisTlsCa: options.redisTlsCa,
      logger: { info: (message, context) => logger.info(message, context), warn: (message, context) => logger.warn(message, context) },
    });
    await authenticationLimiter.start();
    const throttle = new AuthenticationThrottle(authenticationLimiter);
    // oidc-provider takes its key set at construction: a changed set gets a new provider (all state
    // it needs is in the database adapter, so requests in flight finish on the old one).
    const buildProvider = (keySet: SigningKeySet) =>
      createOidcProvider({
        issuer: options.issuer,
        audience: options.audience,
        signingKeys: keySet.keys,
        cookieKeys: cookieKeys.keys,
        clients,
        users,
        tenants: tenantsRepository,
        console: options.console,
        dataSource,
        adminClient,
        onServerError: (error) => logger.error('OAuth request failed', { error: String(error) }),
        throttle,
        trustProxy: options.trustProxy,
        extraPublishedKeys: options.testPublishedKeys,
      });
    const kidsOf = (keySet: SigningKeySet): string => keySet.keys.map((key) => key.kid).join(' ');
    let keySet = await keyStore.load();
    let handleOAuth = buildProvider(keySet);
    logger.info('Signing keys loaded', { signing: keySet.keys[0]?.kid, published: keySet.keys.length });

    let stopped = false;
    const scheduleKeyReload = (nextChangeAt: Date | undefined): void => {
      if (stopped) return;
      clearTimeout(keyTimer);
      const untilChange = nextChangeAt ? Math.max(0, nextChangeAt.getTime() - Date.now()) + 50 : Infinity;
      keyTimer = setTimeout(() => void reloadKeys(), Math.min(KEY_RELOAD_INTERVAL_MS, untilChange));
      keyTimer.unref();
    };
    const reloadKeys = async (): Promise<void> => {
      try {
        const next = await keyStore.load();
        if (kidsOf(next) !== kidsOf(keySet)) {
          handleOAuth = buildProvider(next);
          logger.info('Signing keys changed', { signing: next.keys[0]?.kid, published: next.keys.map((key) => key.kid) });
        }
        keySet = next;
        scheduleKeyReload(next.nextChangeAt);
      } catch (error) {
        logger.warn('Reloading signing keys failed; serving the previous ones', { error: String(error) });
        scheduleKeyReload(undefined);
      }
    };
    scheduleKeyReload(keySet.nextChangeAt);

    const rotateSigningKey = async (): Promise<SigningKeyRotationView> => {
      const result = await keyStore.rotate();
      if (!result.rotated) {
        throw new DomainError(ErrorCode.Conflict, `A rotation is already pending: key ${result.pendingKid} signs from ${result.activatesAt.toISOString()}`);
      }
      logger.info('Signing key rotation started', { kid: result.kid, activatesAt: result.activatesAt.toISOString() });
      await reloadKeys();
      return { kid: result.kid, state: 'published', activatesAt: result.activatesAt.toISOString() };
    };

    // Operator messages: provisioning, tenant lookups and key rotation act on the platform, never inside one tenant.
    options.bus.serve(Topics.identityRequests, IDP_GROUP, identityRequestHandlers(tenants, rotateSigningKey), { tenancy: 'operator' });

    // Expired sessions, codes and refresh tokens are unreadable already; this only reclaims the space.
    const sweeper = setInterval(() => {
      sweepExpired(dataSource).catch((error: unknown) => logger.warn('Sweeping expired OAuth artefacts failed', { error: String(error) }));
    }, ARTEFACT_SWEEP_INTERVAL_MS);
    sweeper.unref();

    let draining = false;
    const ready = async (): Promise<{ up: boolean; details: Record<string, unknown> }> => {
      // The token endpoint needs only the database; the bus matters for provisioning and is reported, not required.
      const database = !draining && (await pingDatabase(dataSource));
      return { up: !draining && database, details: { database: database ? 'up' : 'down', bus: options.bus.health(), draining } };
    };
    if (options.metrics) databaseMetrics(options.metrics, IDENTITY_SCHEMA, dataSource);
    const server = createIdpServer({
      handle: (req, res) => handleOAuth(req, res),
      ready,
      onError: (error) => logger.error('HTTP request failed', { error: String(error) }),
      metrics: options.metrics,
      tls: options.tls,
      hsts: new URL(options.issuer).protocol === 'https:',
    });
    const address = await listen(server, options.port, options.host);
    const url = urlOf(options.host, address.port, options.tls ? 'https' : 'http');
    logger.info('Identity provider listening', { url, issuer: options.issuer, audience: options.audience });

    let stopping: Promise<void> | undefined;
    return {
      url,
      ready,
      stop: () => {
        stopping ??= (async () => {
          draining = true;
          stopped = true;
          clearInterval(sweeper);
          clearTimeout(keyTimer);
          await closeServer(server, SHUTDOWN_GRACE_MS);
          await authenticationLimiter?.close();
          await dataSource.destroy();
        })();
        return stopping;
      },
    };
  } catch (error) {
    clearTimeout(keyTimer);
    await authenticationLimiter?.close();
    await dataSource.destroy();
    throw error;
  }
}
