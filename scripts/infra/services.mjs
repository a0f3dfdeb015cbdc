#!/usr/bin/env node
// Makes sure the PostgreSQL and Redis servers used by development and tests are
// accepting connections on this machine, starting the locally installed ones
// when they are down.
//
//   node scripts/infra/services.mjs ensure
//
// Environment: PGPORT (5432) and PG_CLUSTER (main) select the Debian cluster,
// whose configured port must match; REDIS_PORT (6379); SERVICES_START_TIMEOUT_MS (30000).
//
// Only node: builtins are used so that this runs before any npm install.

import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const HOST = '127.0.0.1';
const POSTGRES_CONFIG_DIR = '/etc/postgresql';

const defaultLog = (message) => process.stderr.write(`[services] ${message}\n`);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export async function ensureServices(opts = {}) {
  const env = opts.env ?? process.env;
  const log = opts.log ?? defaultLog;
  const timeoutMs = Number(opts.timeoutMs ?? env.SERVICES_START_TIMEOUT_MS ?? 30_000);
  const services = [
    {
      name: 'PostgreSQL',
      port: Number(env.PGPORT ?? 5432),
      start: () => startPostgres(env.PG_CLUSTER ?? 'main'),
    },
    {
      name: 'Redis',
      port: Number(env.REDIS_PORT ?? 6379),
      start: (port) => startRedis(port),
    },
  ];

  const failures = [];
  for (const service of services) {
    try {
      await ensureService(service, { log, timeoutMs });
    } catch (err) {
      failures.push(err.message);
    }
  }
  if (failures.length) throw new Error(failures.join('\n'));
}

async function ensureService({ name, port, start }, { log, timeoutMs }) {
  const address = `${HOST}:${port}`;
  if (await canConnect(HOST, port)) {
    log(`${name} is up on ${address}`);
    return;
  }
  log(`${name} is not accepting connections on ${address}; starting it`);
  const hint = start(port);
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await canConnect(HOST, port)) {
      log(`${name} is up on ${address}`);
      return;
    }
    await sleep(250);
  }
  throw new Error(`${name} was started but did not accept connections on ${address} within ${timeoutMs / 1000} s${hint ? ` (${hint})` : ''}`);
}

function startPostgres(cluster) {
  if (!commandExists('pg_ctlcluster') || !fs.existsSync(POSTGRES_CONFIG_DIR)) {
    throw new Error(`PostgreSQL is down and not installed (no pg_ctlcluster or ${POSTGRES_CONFIG_DIR}); install it with: apt-get install postgresql`);
  }
  // Several major versions may be installed; use the newest one that has the cluster.
  const version = fs
    .readdirSync(POSTGRES_CONFIG_DIR)
    .filter((entry) => fs.existsSync(path.join(POSTGRES_CONFIG_DIR, entry, cluster)))
    .sort((a, b) => Number(b) - Number(a))[0];
  if (!version) {
    throw new Error(`PostgreSQL is down and has no "${cluster}" cluster under ${POSTGRES_CONFIG_DIR}`);
  }
  runOrThrow('pg_ctlcluster', ['--skip-systemctl-redirect', version, cluster, 'start'], `PostgreSQL ${version}/${cluster}`);
  return `see /var/log/postgresql/postgresql-${version}-${cluster}.log`;
}

function startRedis(port) {
  if (!commandExists('redis-server')) {
    throw new Error('Redis is down and not installed (no redis-server); install it with: apt-get install redis-server');
  }
  const fallback = path.join(os.tmpdir(), 'mission-service-redis');
  const dir = writableDir('/var/lib/redis') ?? ensureDir(fallback);
  const logfile = path.join(writableDir('/var/log/redis') ?? ensureDir(fallback), 'ci.log');
  runOrThrow(
    'redis-server',
    [
      '--daemonize',
      'yes',
      // "-::1": bind IPv6 loopback too, but only where it exists.
      '--bind',
      '127.0.0.1',
      '-::1',
      '--port',
      String(port),
      '--save',
      '',
      '--appendonly',
      'no',
      '--dir',
      dir,
      '--logfile',
      logfile,
    ],
    'Redis',
  );
  return `see ${logfile}`;
}

function runOrThrow(command, args, what) {
  const res = spawnSync(command, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  const output = `${res.stdout ?? ''}${res.stderr ?? ''}`.trim();
  if (res.error || res.status !== 0) {
    const reason = res.error ? res.error.message : `exit ${res.status}`;
    throw new Error(`could not start ${what}: ${command} ${args.join(' ')} failed (${reason})${output ? `\n${output}` : ''}`);
  }
}

function commandExists(command) {
  return (process.env.PATH ?? '').split(path.delimiter).some((dir) => {
    try {
      fs.accessSync(path.join(dir, command), fs.constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

function writableDir(dir) {
  try {
    fs.accessSync(dir, fs.constants.W_OK);
    return fs.statSync(dir).isDirectory() ? dir : null;
  } catch {
    return null;
  }
}

function ensureDir(dir) {
  fs.mkdirSync(dir, { recursive: true });
  return dir;
}

function canConnect(host, port, timeoutMs = 1000) {
  return new Promise((resolve) => {
    const socket = net.createConnection({ host, port });
    const done = (ok) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

const USAGE = 'usage: node scripts/infra/services.mjs ensure';

function invokedDirectly() {
  if (!process.argv[1]) return false;
  try {
    return fs.realpathSync(process.argv[1]) === fs.realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

if (invokedDirectly()) {
  const [command, ...rest] = process.argv.slice(2);
  if (command !== 'ensure' || rest.length) {
    process.stderr.write(`${USAGE}\n`);
    process.exitCode = 2;
  } else {
    ensureServices().then(
      () => {
        process.exitCode = 0;
      },
      (err) => {
        process.stderr.write(`[services] error: ${err.message}\n`);
        process.exitCode = 1;
      },
    );
  }
}
