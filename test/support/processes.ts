import { ChildProcess, spawn } from 'node:child_process';
import { createWriteStream, mkdirSync } from 'node:fs';
import path from 'node:path';

export const REPO_ROOT = path.join(__dirname, '..', '..');

/**
 * Node flags every server the suites and benchmarks start runs with, as `npm start` runs the
 * all-in-one process: V8's young generation at Node 20's size. On a host without a memory limit
 * Node 24 sizes it by the heap limit, 64 MiB semi-spaces on a machine with 24 GiB, which added
 * about 90 MiB to the all-in-one process's resident memory under the read load for no measurable
 * throughput (`bench/README.md`, "Node 24's young generation"). The container image does not set
 * it: in a pod, Node sizes the heap from the memory limit and V8 the young generation with it
 * (smaller than this). `test/unit/node-flags.spec.ts` keeps `npm start` in step.
 */
export const SERVER_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=16'];

export interface RunningProcess {
  readonly name: string;
  readonly child: ChildProcess;
  /** Everything the process printed so far (for failure messages). */
  output(): string;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/**
 * Starts a TypeScript entry point of this repository (or of a copy of it, `cwd`) as its own Node
 * process, with this process's environment unless `inheritEnv` is false.
 */
export function startProcess(name: string, entry: string, env: Record<string, string>, options: { readonly cwd?: string; readonly inheritEnv?: boolean } = {}): RunningProcess {
  const child = spawn(process.execPath, [...SERVER_NODE_FLAGS, '-r', './tools/register.cjs', entry], {
    cwd: options.cwd ?? REPO_ROOT,
    env: { ...(options.inheritEnv === false ? {} : process.env), NODE_ENV: 'test', LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const keep = (chunk: Buffer): void => {
    output = (output + chunk.toString('utf8')).slice(-20_000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  // MS_TEST_LOG_DIR keeps every process's whole output, for looking into a failed run.
  const logDir = process.env.MS_TEST_LOG_DIR;
  if (logDir) {
    mkdirSync(logDir, { recursive: true });
    const file = createWriteStream(path.join(logDir, `${name}-${child.pid}.log`), { flags: 'a' });
    child.stdout?.pipe(file);
    child.stderr?.pipe(file);
  }
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return {
    name,
    child,
    output: () => output,
    stop: async (signal = 'SIGTERM') => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
  };
}

/** Polls `url` until it answers 200, or fails with the process output. */
export async function waitUntilReady(url: string, processes: readonly RunningProcess[], timeoutMs = 90_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    for (const running of processes) {
      if (running.child.exitCode !== null) throw new Error(`${running.name} exited with ${running.child.exitCode}:\n${running.output()}`);
    }
    try {
      const response = await fetch(url, { signal: AbortSignal.timeout(2_000) });
      if (response.status === 200) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      throw new Error(`Not ready after ${timeoutMs} ms: ${url}\n${processes.map((p) => `--- ${p.name}\n${p.output()}`).join('\n')}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}
