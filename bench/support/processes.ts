import { spawn } from 'node:child_process';
import type { RunningProcess } from '../../test/support/processes';
import { REPO_ROOT, SERVER_NODE_FLAGS } from '../../test/support/processes';

export { REPO_ROOT, waitUntilReady } from '../../test/support/processes';
export type { RunningProcess } from '../../test/support/processes';

export interface ServerProcess extends RunningProcess {
  readonly pid: number;
}

const live = new Set<ServerProcess>();

/** Kills every server still running at once (process groups, so their own children go too). */
export function killAllServers(): void {
  for (const server of live) {
    try {
      process.kill(-server.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
}

// Last resort for exits that skip the orderly clean-up: no server outlives the benchmark.
process.on('exit', killAllServers);

/**
 * Starts a TypeScript entry point of this repository as its own Node process, like the test
 * suites' startProcess (same environment), but in a process group of its own: Ctrl-C reaches
 * the benchmark only, which then stops each server once and in order (a server receiving the
 * terminal's SIGINT and then our SIGTERM would take the second signal as "exit now" and orphan
 * its embedded PostgreSQL).
 */
export function startServer(name: string, entry: string, env: Record<string, string>): ServerProcess {
  const child = spawn(process.execPath, [...SERVER_NODE_FLAGS, '-r', './tools/register.cjs', entry], {
    cwd: REPO_ROOT,
    // As the suites' startProcess does (the distributed target is started by it): NODE_ENV and
    // LOG_LEVEL are the same for every target.
    env: { ...process.env, NODE_ENV: 'test', LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  if (child.pid === undefined) throw new Error(`${name} could not be started`);
  let output = '';
  const keep = (chunk: Buffer): void => {
    output = (output + chunk.toString('utf8')).slice(-20_000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code, signal) => resolve(code ?? (signal ? 128 : null))));
  const pid = child.pid;
  const server: ServerProcess = {
    name,
    child,
    pid,
    output: () => output,
    stop: async (signal = 'SIGTERM') => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      const timer = setTimeout(() => {
        try {
          process.kill(-pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }, 30_000);
      const code = await exited;
      clearTimeout(timer);
      live.delete(server);
      return code;
    },
  };
  live.add(server);
  child.once('exit', () => {
    // The group may still hold children of a server that died: take them down with it.
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      // nothing left
    }
    live.delete(server);
  });
  return server;
}
