import { readFile } from 'node:fs/promises';
import path from 'node:path';

/** One call of the operator API, as the command line asked for it. */
export interface AdminCall {
  readonly method: 'GET' | 'POST' | 'PATCH';
  readonly path: string;
  readonly body?: Record<string, unknown>;
  /** `users create --password-stdin`: the password is read from standard input. */
  readonly passwordFromStdin?: boolean;
}

export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

export const USAGE = `Usage: npm run -s admin -- <command>

  tenants create --name <name> --tier <starter|business|professional|enterprise> [--rpm <n>]
                 [--storage-documents <n>] [--storage-bytes <n>]   (enterprise: its own storage quota)
  tenants get <tenantId>
  tenants usage <tenantId>   documents and bytes stored in the Brain, against the quota
  tenants update <tenantId> [--tier <tier>] [--rpm <n>] [--storage-documents <n>] [--storage-bytes <n>]
  clients create <tenantId> [--scopes <scope,scope,...>] [--redirect-uri <uri>]...
  users create <tenantId> --username <name> --password-stdin [--scopes <scope,...>]
                    the password is read from standard input (never from the command line,
                    which other users of the machine and the shell's history can read)
  keys rotate       publish a new signing key; it signs after the idp's publish delay
  quickstart [--name <name>] [--tier <tier>]
                    a tenant (default "Demo", business), its client and a tenant token, printed
                    as shell exports: eval "$(npm run -s admin -- quickstart)"

Prints the API's JSON answer; an error's problem details go to stderr (exit 1), usage errors exit 2.
Environment: ADMIN_CLIENT_ID / ADMIN_CLIENT_SECRET (default: <DATA_DIR>/admin-client.json),
GATEWAY_URL (http://127.0.0.1:3000), IDP_ISSUER (http://127.0.0.1:3001), DATA_DIR (./.data).`;

interface Parsed {
  readonly positional: string[];
  readonly options: Map<string, string[]>;
}

const FLAGS_WITHOUT_VALUE = new Set(['password-stdin']);

function parse(args: readonly string[]): Parsed {
  const positional: string[] = [];
  const options = new Map<string, string[]>();
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] ?? '';
    if (!arg.startsWith('--')) {
      positional.push(arg);
      continue;
    }
    const [name, inline] = arg.slice(2).split(/=(.*)/s, 2) as [string, string | undefined];
    let value = inline;
    if (value === undefined && !FLAGS_WITHOUT_VALUE.has(name)) {
      value = args[++i];
      if (value === undefined) throw new UsageError(`--${name} needs a value`);
    }
    options.set(name, [...(options.get(name) ?? []), value ?? 'true']);
  }
  return { positional, options };
}

function take(parsed: Parsed, allowed: readonly string[]): Map<string, string[]> {
  for (const name of parsed.options.keys()) {
    if (!allowed.includes(name)) throw new UsageError(`Unknown option --${name}`);
  }
  return parsed.options;
}

function single(options: Map<string, string[]>, name: string): string | undefined {
  const values = options.get(name);
  if (values && values.length > 1) throw new UsageError(`--${name} given more than once`);
  return values?.[0];
}

/** Numbers stay numbers, so the server validates them (and rejects "abc" with a field error). */
function numberOrText(value: string): number | string {
  return /^-?\d+$/.test(value) ? Number(value) : value;
}

function list(value: string | undefined): string[] | undefined {
  return value === undefined
    ? undefined
    : value
        .split(',')
        .map((part) => part.trim())
        .filter(Boolean);
}

function tenantPath(id: string | undefined, what: string): string {
  if (!id) throw new UsageError(`${what} needs a tenant id`);
  return `/admin/tenants/${encodeURIComponent(id)}`;
}

/** `--storage-documents` / `--storage-bytes` as the API's `storage` object (absent when neither is given). */
function storageOf(options: Map<string, string[]>): Record<string, unknown> | undefined {
  const documents = single(options, 'storage-documents');
  const bytes = single(options, 'storage-bytes');
  if (documents === undefined && bytes === undefined) return undefined;
  return defined({ documents: documents === undefined ? undefined : numberOrText(documents), bytes: bytes === undefined ? undefined : numberOrText(bytes) });
}

function defined(body: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(body).filter(([, value]) => value !== undefined));
}

/** Turns the arguments after `npm run admin --` into one operator API call. */
export function commandToCall(args: readonly string[]): AdminCall {
  const parsed = parse(args);
  const [resource, action, id, ...extra] = parsed.positional;
  const command = `${resource ?? ''} ${action ?? ''}`.trim();
  const expectPositional = (count: number): void => {
    if (extra.length > 0 || (count === 0 && id !== undefined)) throw new UsageError(`Unexpected argument for ${command}: ${[id, ...extra].filter(Boolean).join(' ')}`);
    if (count === 1 && id === undefined) throw new UsageError(`${command} needs a tenant id`);
  };
  switch (command) {
    case 'tenants create': {
      expectPositional(0);
      const options = take(parsed, ['name', 'tier', 'rpm', 'storage-documents', 'storage-bytes']);
      const rpm = single(options, 'rpm');
      return {
        method: 'POST',
        path: '/admin/tenants',
        body: defined({ name: single(options, 'name'), tier: single(options, 'tier'), rpm: rpm === undefined ? undefined : numberOrText(rpm), storage: storageOf(options) }),
      };
    }
    case 'tenants usage':
      expectPositional(1);
      take(parsed, []);
      return { method: 'GET', path: `${tenantPath(id, command)}/usage` };
    case 'tenants get':
      expectPositional(1);
      take(parsed, []);
      return { method: 'GET', path: tenantPath(id, command) };
    case 'tenants update': {
      expectPositional(1);
      const options = take(parsed, ['tier', 'rpm', 'storage-documents', 'storage-bytes']);
      const rpm = single(options, 'rpm');
      return {
        method: 'PATCH',
        path: tenantPath(id, command),
        body: defined({ tier: single(options, 'tier'), rpm: rpm === undefined ? undefined : numberOrText(rpm), storage: storageOf(options) }),
      };
    }
    case 'clients create': {
      expectPositional(1);
      const options = take(parsed, ['scopes', 'redirect-uri']);
      return { method: 'POST', path: `${tenantPath(id, command)}/clients`, body: defined({ scopes: list(single(options, 'scopes')), redirectUris: options.get('redirect-uri') }) };
    }
    case 'users create': {
      expectPositional(1);
      if (parsed.options.has('password'))
        throw new UsageError('A password is never given on the command line (other users of the machine can read it): pipe it in with --password-stdin');
      const options = take(parsed, ['username', 'password-stdin', 'scopes']);
      if (!options.has('password-stdin')) throw new UsageError('users create needs --password-stdin (the password on standard input)');
      return {
        method: 'POST',
        path: `${tenantPath(id, command)}/users`,
        body: defined({ username: single(options, 'username'), scopes: list(single(options, 'scopes')) }),
        passwordFromStdin: true,
      };
    }
    case 'keys rotate':
      expectPositional(0);
      take(parsed, []);
      return { method: 'POST', path: '/admin/keys/rotate' };
    default:
      throw new UsageError(command ? `Unknown command: ${command}` : 'No command given');
  }
}

export interface AdminEnvironment {
  readonly gatewayUrl: string;
  readonly issuer: string;
  readonly clientId: string;
  readonly clientSecret: string;
}

/** Base URLs and operator credentials: environment first, then the embedded mode's data directory and defaults. */
export async function resolveEnvironment(env: Readonly<Record<string, string | undefined>>, cwd: string): Promise<AdminEnvironment> {
  const gatewayUrl = (env.GATEWAY_URL || env.PUBLIC_URL || 'http://127.0.0.1:3000').replace(/\/$/, '');
  const issuer = (env.IDP_ISSUER || 'http://127.0.0.1:3001').replace(/\/$/, '');
  if (env.ADMIN_CLIENT_ID && env.ADMIN_CLIENT_SECRET) return { gatewayUrl, issuer, clientId: env.ADMIN_CLIENT_ID, clientSecret: env.ADMIN_CLIENT_SECRET };
  if (env.ADMIN_CLIENT_ID || env.ADMIN_CLIENT_SECRET) throw new UsageError('Set both ADMIN_CLIENT_ID and ADMIN_CLIENT_SECRET, or neither');
  const file = path.resolve(cwd, env.DATA_DIR || './.data', 'admin-client.json');
  let stored: unknown;
  try {
    stored = JSON.parse(await readFile(file, 'utf8'));
  } catch (error) {
    throw new UsageError(`No operator credentials: set ADMIN_CLIENT_ID and ADMIN_CLIENT_SECRET, or start the embedded mode once to create ${file} (${(error as Error).message})`);
  }
  const { clientId, clientSecret } = (stored ?? {}) as { clientId?: unknown; clientSecret?: unknown };
  if (typeof clientId !== 'string' || typeof clientSecret !== 'string') throw new UsageError(`${file} does not hold clientId and clientSecret`);
  return { gatewayUrl, issuer, clientId, clientSecret };
}

export interface AdminResult {
  readonly ok: boolean;
  readonly status: number;
  readonly body: unknown;
}

/** The issuer's token endpoint, from its discovery document, refused unless it is the configured issuer's own. */
async function tokenEndpointOf(environment: AdminEnvironment, fetchImpl: typeof fetch): Promise<string> {
  const discovery = await fetchImpl(`${environment.issuer}/.well-known/openid-configuration`, { signal: AbortSignal.timeout(10_000) });
  if (!discovery.ok) throw new Error(`The identity provider at ${environment.issuer} answered ${discovery.status} to discovery`);
  const { issuer, token_endpoint: tokenEndpoint } = (await discovery.json()) as { issuer?: unknown; token_endpoint?: unknown };
  // The operator secret goes only to the issuer that was configured (RFC 8414 §3.3): metadata that
  // names another issuer, or a token endpoint elsewhere, is refused before anything is sent.
  if (typeof issuer !== 'string' || issuer.replace(/\/$/, '') !== environment.issuer) {
    throw new Error(`The identity provider at ${environment.issuer} names another issuer (${String(issuer)}): refusing to send it the operator secret`);
  }
  if (typeof tokenEndpoint !== 'string') throw new Error('The identity provider publishes no token endpoint');
  let endpoint: URL;
  try {
    endpoint = new URL(tokenEndpoint);
  } catch {
    throw new Error(`The identity provider publishes a token endpoint that is not a URL: ${tokenEndpoint}`);
  }
  if (endpoint.origin !== new URL(environment.issuer).origin) {
    throw new Error(`The identity provider's token endpoint ${tokenEndpoint} is not on the issuer ${environment.issuer}: refusing to send it the operator secret`);
  }
  return tokenEndpoint;
}

/** client_credentials at `tokenEndpoint`: the access token, or the failed answer. */
async function clientToken(tokenEndpoint: string, clientId: string, clientSecret: string, fetchImpl: typeof fetch): Promise<{ token: string } | AdminResult> {
  const basic = Buffer.from(`${encodeURIComponent(clientId)}:${encodeURIComponent(clientSecret)}`).toString('base64');
  const response = await fetchImpl(tokenEndpoint, {
    method: 'POST',
    headers: { authorization: `Basic ${basic}`, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'client_credentials' }),
    signal: AbortSignal.timeout(10_000),
  });
  const body = (await response.json()) as { access_token?: string };
  return response.ok && body.access_token ? { token: body.access_token } : { ok: false, status: response.status, body };
}

/** An operator token (client_credentials at the issuer's discovered token endpoint), then the call. */
export async function perform(call: AdminCall, environment: AdminEnvironment, fetchImpl: typeof fetch = fetch): Promise<AdminResult> {
  const operator = await clientToken(await tokenEndpointOf(environment, fetchImpl), environment.clientId, environment.clientSecret, fetchImpl);
  if (!('token' in operator)) return operator;
  const token = { access_token: operator.token };

  const response = await fetchImpl(`${environment.gatewayUrl}${call.path}`, {
    method: call.method,
    headers: { authorization: `Bearer ${token.access_token}`, ...(call.body ? { 'content-type': 'application/json' } : {}) },
    body: call.body ? JSON.stringify(call.body) : undefined,
    signal: AbortSignal.timeout(30_000),
  });
  const text = await response.text();
  let body: unknown = text;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    // not JSON: printed as a string
  }
  return { ok: response.ok, status: response.status, body };
}

/**
 * `quickstart [--name <name>] [--tier <tier>]`: a tenant with a client holding all seven tenant
 * scopes, and a token of that client, printed as shell assignments (`eval "$(npm run -s admin --
 * quickstart)"` sets TENANT_ID, CLIENT_ID, CLIENT_SECRET and TOKEN). The secret is shown once.
 */
export async function quickstart(args: readonly string[], environment: AdminEnvironment, fetchImpl: typeof fetch = fetch): Promise<{ ok: true; text: string } | AdminResult> {
  const parsed = parse(args);
  if (parsed.positional.length > 0) throw new UsageError(`Unexpected argument for quickstart: ${parsed.positional.join(' ')}`);
  const options = take(parsed, ['name', 'tier']);
  const name = single(options, 'name') ?? 'Demo';
  const tier = single(options, 'tier') ?? 'business';
  const created = await perform({ method: 'POST', path: '/admin/tenants', body: { name, tier } }, environment, fetchImpl);
  if (!created.ok) return created;
  const tenant = created.body as { id: string; client: { clientId: string; clientSecret: string } };
  const issued = await clientToken(await tokenEndpointOf(environment, fetchImpl), tenant.client.clientId, tenant.client.clientSecret, fetchImpl);
  if (!('token' in issued)) return issued;
  const quote = (value: string): string => `'${value.replace(/'/g, `'\\''`)}'`;
  const text = [
    `# Tenant ${JSON.stringify(name)} (${tier}), its client (all seven tenant scopes; the secret is shown only now) and a token valid for one hour.`,
    `export GATEWAY_URL=${quote(environment.gatewayUrl)}`,
    `export TENANT_ID=${quote(tenant.id)}`,
    `export CLIENT_ID=${quote(tenant.client.clientId)}`,
    `export CLIENT_SECRET=${quote(tenant.client.clientSecret)}`,
    `export TOKEN=${quote(issued.token)}`,
  ].join('\n');
  return { ok: true, text };
}
