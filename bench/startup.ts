/**
 * Start-up: how long `npm start` takes to be ready, on a fresh data directory and on a restart.
 * Targets: ready within 5 s on a fresh data directory and within 2 s on a restart.
 *
 *   node -r ./tools/register.cjs bench/startup.ts [--rounds=5] [--write]
 *
 * Each round starts the all-in-one server on a new, empty data directory (embedded PostgreSQL's
 * cluster made, migrations run, dev credentials generated), stops it with SIGTERM as a person's
 * Ctrl-C would, and starts it again on the same directory. Each start runs the commands of
 * package.json's `start` script (the console's staleness check, then the server, with the same
 * node flags), not npm itself: npm's own launch comes on top (about 0.1 s here).
 * Ready is the first 200 from `GET /health/ready`, polled every 10 ms from the moment the first
 * command is spawned; stopping is from the signal to the server's exit.
 */
import { ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { freePort } from '@mission/persistence';
import { percentiles } from './support/stats';

const REPO_ROOT = path.join(__dirname, '..');
const log = (message: string): void => void process.stderr.write(`[bench:startup] ${message}\n`);
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** The goals, milliseconds to ready. */
export const STARTUP_TARGETS = { freshMs: 5_000, restartMs: 2_000 } as const;

export interface StartupOptions {
  readonly rounds: number;
  readonly write: boolean;
}

export function parseStartupOptions(argv: readonly string[]): StartupOptions {
  let rounds = 5;
  let write = false;
  for (const arg of argv) {
    const match = /^--([a-z]+)(?:=(.*))?$/.exec(arg);
    if (match?.[1] === 'write' && match[2] === undefined) write = true;
    else if (match?.[1] === 'rounds' && match[2] !== undefined) {
      rounds = Number(match[2]);
      if (!Number.isInteger(rounds) || rounds < 1 || rounds > 50) throw new Error('--rounds must be a whole number from 1 to 50');
    } else throw new Error(`Unknown option ${arg}; known: --rounds=N --write`);
  }
  return { rounds, write };
}

/**
 * The commands of package.json's `start` script, each as node's arguments: `node a && node b` is
 * [[a…], [b…]]. Only that shape is understood (a change to the script that breaks it fails here,
 * not silently measures something else).
 */
export function startCommands(script: string): string[][] {
  return script.split('&&').map((part) => {
    const words = part.trim().split(/\s+/);
    if (words[0] !== 'node' || words.length < 2 || words.some((word) => /["'$`|;<>&()\\]/.test(word)))
      throw new Error(`The start script's command "${part.trim()}" is not a plain node command`);
    return words.slice(1);
  });
}

interface Ports {
  readonly port: number;
  readonly idpPort: number;
  readonly opsPort: number;
}

function environment(dataDir: string, ports: Ports): NodeJS.ProcessEnv {
  return {
    ...process.env,
    NODE_ENV: 'production',
    LOG_LEVEL: 'warn',
    HOST: '127.0.0.1',
    PORT: String(ports.port),
    IDP_PORT: String(ports.idpPort),
    OPS_PORT: String(ports.opsPort),
    DATA_DIR: dataDir,
    // The embedded defaults, whatever this shell has set.
    ...Object.fromEntries(['DATABASE_URL', 'KAFKA_BROKERS', 'REDIS_URL', 'ADMIN_CLIENT_ID', 'ADMIN_CLIENT_SECRET', 'PUBLIC_URL', 'IDP_ISSUER'].map((name) => [name, ''])),
  };
}

function run(args: readonly string[], env: NodeJS.ProcessEnv): ChildProcess {
  return spawn(process.execPath, args, { cwd: REPO_ROOT, env, stdio: ['ignore', 'ignore', 'inherit'] });
}

function exited(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolve) => child.once('exit', (code) => resolve(code)));
}

/** Runs the start script's commands; resolves with the server (the last command) and the milliseconds until it answers ready. */
async function start(commands: readonly string[][], env: NodeJS.ProcessEnv, readyUrl: string): Promise<{ server: ChildProcess; ms: number }> {
  const began = performance.now();
  for (const args of commands.slice(0, -1)) {
    const code = await exited(run(args, env));
    if (code !== 0) throw new Error(`node ${args.join(' ')} exited with ${code}`);
  }
  const server = run(commands[commands.length - 1] ?? [], env);
  const deadline = began + 120_000;
  for (;;) {
    const status = await fetch(readyUrl, { signal: AbortSignal.timeout(1_000) })
      .then((response) => response.status)
      .catch(() => 0);
    if (status === 200) return { server, ms: performance.now() - began };
    if (server.exitCode !== null || server.signalCode !== null) throw new Error(`the server exited (${server.exitCode ?? server.signalCode}) before it was ready`);
    if (performance.now() > deadline) {
      server.kill('SIGKILL');
      throw new Error('the server was not ready within 120 s');
    }
    await sleep(10);
  }
}

/** SIGTERM, then the milliseconds until the server exited; it must exit with 0 within 30 s. */
async function stop(server: ChildProcess): Promise<number> {
  const began = performance.now();
  const exit = exited(server);
  server.kill('SIGTERM');
  const code = await Promise.race([exit, sleep(30_000).then(() => 'timeout' as const)]);
  if (code === 'timeout') {
    server.kill('SIGKILL');
    throw new Error('the server did not exit within 30 s of SIGTERM');
  }
  if (code !== 0) throw new Error(`the server exited with ${code} after SIGTERM`);
  return performance.now() - began;
}

async function main(): Promise<void> {
  const options = parseStartupOptions(process.argv.slice(2));
  const script = (JSON.parse(readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts.start ?? '';
  const commands = startCommands(script);
  const rounds: Array<{ freshMs: number; restartMs: number; stopMs: number }> = [];
  for (let round = 1; round <= options.rounds; round++) {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'mission-bench-startup-'));
    const ports = { port: await freePort(), idpPort: await freePort(), opsPort: await freePort() };
    const env = environment(dataDir, ports);
    const readyUrl = `http://127.0.0.1:${ports.port}/health/ready`;
    let server: ChildProcess | undefined;
    try {
      const fresh = await start(commands, env, readyUrl);
      server = fresh.server;
      const stopMs = await stop(server);
      const restart = await start(commands, env, readyUrl);
      server = restart.server;
      await stop(server);
      rounds.push({ freshMs: Math.round(fresh.ms), restartMs: Math.round(restart.ms), stopMs: Math.round(stopMs) });
      log(`round ${round}: ready in ${Math.round(fresh.ms)} ms on a fresh data directory, stopped in ${Math.round(stopMs)} ms, ready again in ${Math.round(restart.ms)} ms`);
    } finally {
      if (server && server.exitCode === null && server.signalCode === null) {
        server.kill('SIGKILL');
        await exited(server);
      }
      await rm(dataDir, { recursive: true, force: true });
    }
  }
  const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: REPO_ROOT, encoding: 'utf8' }).trim();
  const fresh = percentiles(rounds.map((round) => round.freshMs));
  const restart = percentiles(rounds.map((round) => round.restartMs));
  const stopped = percentiles(rounds.map((round) => round.stopMs));
  const report = {
    suite: 'startup',
    date: new Date().toISOString(),
    commit,
    machine: { cpus: os.availableParallelism(), model: os.cpus()[0]?.model.trim(), node: process.version, loadAverage: os.loadavg().map((n) => Math.round(n * 100) / 100) },
    startScript: script,
    rounds,
    medianMs: { fresh: fresh.p50, restart: restart.p50, stop: stopped.p50 },
    maxMs: { fresh: fresh.max, restart: restart.max, stop: stopped.max },
    targetMs: STARTUP_TARGETS,
  };
  const verdict = (ms: number, target: number): string => (ms <= target ? 'met' : 'not met');
  process.stdout.write(
    [
      '',
      `npm start (its commands, without npm's launcher), commit ${commit}, ${rounds.length} rounds: milliseconds`,
      '',
      '| | median | max | goal | |',
      '|---|--:|--:|--:|---|',
      `| ready on a fresh data directory | ${fresh.p50} | ${fresh.max} | ≤ ${STARTUP_TARGETS.freshMs} | ${verdict(fresh.p50, STARTUP_TARGETS.freshMs)} |`,
      `| ready on a restart | ${restart.p50} | ${restart.max} | ≤ ${STARTUP_TARGETS.restartMs} | ${verdict(restart.p50, STARTUP_TARGETS.restartMs)} |`,
      `| stopped (SIGTERM to exit) | ${stopped.p50} | ${stopped.max} | – | |`,
      '',
    ].join('\n'),
  );
  if (options.write) {
    const dir = path.join(REPO_ROOT, 'bench', 'results');
    mkdirSync(dir, { recursive: true });
    const file = path.join(dir, `startup-${report.date.slice(0, 10)}-${commit}.json`);
    writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
    log(`results written to ${path.relative(REPO_ROOT, file)}`);
  }
}

if (require.main === module) {
  main().catch((error: unknown) => {
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exitCode = 1;
  });
}
