import { spawn } from 'node:child_process';
import path from 'node:path';
import { onShutdownSignal, ShutdownHost, ShutdownLogger, SLOW_STOP_STEP_MS, stopStep } from './shutdown';

const ROOT = path.join(__dirname, '..', '..', '..');

interface Deferred {
  readonly promise: Promise<void>;
  resolve(): void;
  reject(error: Error): void;
}

function deferred(): Deferred {
  let resolve!: () => void;
  let reject!: (error: Error) => void;
  const promise = new Promise<void>((ok, fail) => {
    resolve = ok;
    reject = fail;
  });
  return { promise, resolve, reject };
}

/** Lets every promise callback already queued run (the handler chains a few). */
const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** A process that records what the handler does to it: signals are delivered by hand, timers fire by hand. */
function fakeHost() {
  const listeners = new Map<NodeJS.Signals, Array<(signal: NodeJS.Signals) => void>>();
  const events: string[] = [];
  const timers: Array<{ callback: () => void; ms: number; unrefed: boolean }> = [];
  const flush = { result: Promise.resolve() as Promise<void> };
  const host: ShutdownHost = {
    on: (signal, listener) => listeners.set(signal, [...(listeners.get(signal) ?? []), listener]),
    exit: (code) => void events.push(`exit ${code}`),
    setTimeout: (callback, ms) => {
      const timer = { callback, ms, unrefed: false };
      timers.push(timer);
      return { unref: () => void (timer.unrefed = true) };
    },
    flushTraces: () => {
      events.push('flush traces');
      return flush.result;
    },
  };
  const signal = (name: NodeJS.Signals): void => {
    for (const listener of listeners.get(name) ?? []) listener(name);
  };
  return { host, events, timers, flush, signal, listeners };
}

function recordingLogger(): ShutdownLogger & { readonly lines: string[] } {
  const lines: string[] = [];
  const record =
    (level: string) =>
    (...args: unknown[]): void =>
      void lines.push(`${level} ${String(args.find((arg) => typeof arg === 'string'))}`);
  return { lines, info: record('info'), warn: record('warn'), error: record('error') } as unknown as ShutdownLogger & { readonly lines: string[] };
}

describe('onShutdownSignal', () => {
  it.each<NodeJS.Signals>(['SIGTERM', 'SIGINT'])('on %s runs stop once, then flushes traces, then exits 0, and not before stop is done', async (name) => {
    const { host, events, signal } = fakeHost();
    const stopping = deferred();
    const stop = jest.fn(() => {
      events.push('stop');
      return stopping.promise;
    });
    onShutdownSignal(recordingLogger(), stop, 25_000, host);
    expect(stop).not.toHaveBeenCalled();

    signal(name);
    await settle();
    expect(events).toEqual(['stop']);

    stopping.resolve();
    await settle();
    expect(events).toEqual(['stop', 'flush traces', 'exit 0']);
    expect(stop).toHaveBeenCalledTimes(1);
  });

  it('exits 1 when stop fails, and logs why', async () => {
    const { host, events, signal } = fakeHost();
    const logger = recordingLogger();
    onShutdownSignal(logger, () => Promise.reject(new Error('database would not close')), 25_000, host);
    signal('SIGTERM');
    await settle();
    expect(events).toEqual(['exit 1']);
    expect(logger.lines).toContain('error Shutdown failed');
  });

  it('still exits 0 when only flushing the traces fails, and warns', async () => {
    const { host, events, flush, signal } = fakeHost();
    const logger = recordingLogger();
    flush.result = Promise.reject(new Error('collector gone'));
    flush.result.catch(() => undefined);
    onShutdownSignal(logger, async () => undefined, 25_000, host);
    signal('SIGTERM');
    await settle();
    expect(events).toEqual(['flush traces', 'exit 0']);
    expect(logger.lines).toContain('warn Flushing traces failed');
  });

  it('arms a grace timer of graceMs that does not keep the process alive, and exits 1 when stop outlasts it', async () => {
    const { host, events, timers, signal } = fakeHost();
    const logger = recordingLogger();
    const never = deferred();
    onShutdownSignal(logger, () => never.promise, 1_234, host);
    expect(timers).toEqual([]);

    signal('SIGTERM');
    await settle();
    expect(timers.map(({ ms, unrefed }) => ({ ms, unrefed }))).toEqual([{ ms: 1_234, unrefed: true }]);
    expect(events).toEqual([]);

    timers[0]?.callback();
    expect(events).toEqual(['exit 1']);
    expect(logger.lines).toContain('error Shutdown took too long; exiting');
  });

  it.each<[NodeJS.Signals, NodeJS.Signals]>([
    ['SIGTERM', 'SIGTERM'],
    ['SIGTERM', 'SIGINT'],
    ['SIGINT', 'SIGTERM'],
  ])('exits 1 at once on a second signal (%s, then %s) while stop still runs, without running stop again', async (first, second) => {
    const { host, events, timers, signal } = fakeHost();
    const stopping = deferred();
    const stop = jest.fn(() => stopping.promise);
    onShutdownSignal(recordingLogger(), stop, 25_000, host);

    signal(first);
    await settle();
    expect(events).toEqual([]);
    signal(second);
    expect(events).toEqual(['exit 1']);
    expect(stop).toHaveBeenCalledTimes(1);
    expect(timers).toHaveLength(1);
  });

  describe('in a real process', () => {
    /**
     * Runs a Node process that installs the handler with `stop`, signals it once ready, and reports
     * how it ended. Further signals are sent once `stop` has written "stopping" (the first signal was
     * handled), not after a delay a busy machine might outlast.
     */
    function run(stop: string, graceMs: number, signals: NodeJS.Signals[]): Promise<{ code: number | null; signal: NodeJS.Signals | null; output: string; ms: number }> {
      const script = `
        const { onShutdownSignal } = require('./libs/runtime/src/shutdown.ts');
        const logger = { info: () => undefined, warn: () => undefined, error: (...args) => process.stdout.write('error ' + args.find((a) => typeof a === 'string') + '\\n') };
        onShutdownSignal(logger, ${stop}, ${graceMs});
        setInterval(() => undefined, 1000);
        process.stdout.write('ready\\n');
      `;
      return new Promise((resolve, reject) => {
        const child = spawn(process.execPath, ['-r', './tools/register.cjs', '-e', script], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
        let output = '';
        let signalledAt = 0;
        const [firstSignal, ...rest] = signals;
        child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
        child.stdout.on('data', (chunk: Buffer) => {
          output += chunk.toString('utf8');
          if (signalledAt === 0 && output.includes('ready\n')) {
            signalledAt = Date.now();
            if (firstSignal) child.kill(firstSignal);
          }
          // Later signals once the first has been handled.
          if (rest.length > 0 && output.includes('stopping\n')) for (const next of rest.splice(0)) child.kill(next);
        });
        // A handler that never exits fails the test rather than hanging it (a slow start included).
        const killer = setTimeout(() => child.kill('SIGKILL'), 20_000);
        child.on('error', reject);
        child.on('exit', (code, signal) => {
          clearTimeout(killer);
          resolve({ code, signal, output, ms: Date.now() - signalledAt });
        });
      });
    }

    it('exits 0 once stop is done, after waiting for it', async () => {
      const ended = await run('() => new Promise((resolve) => setTimeout(resolve, 400))', 10_000, ['SIGTERM']);
      expect({ code: ended.code, signal: ended.signal }).toEqual({ code: 0, signal: null });
      expect(ended.ms).toBeGreaterThanOrEqual(400);
    }, 30_000);

    it('exits 1 when stop outlasts the grace period', async () => {
      const ended = await run('() => new Promise(() => undefined)', 300, ['SIGTERM']);
      expect({ code: ended.code, signal: ended.signal }).toEqual({ code: 1, signal: null });
      expect(ended.output).toContain('error Shutdown took too long; exiting');
    }, 30_000);

    it('exits 1, not by the signal, on a second SIGTERM', async () => {
      const ended = await run("() => (process.stdout.write('stopping\\n'), new Promise(() => undefined))", 60_000, ['SIGTERM', 'SIGTERM']);
      expect({ code: ended.code, signal: ended.signal }).toEqual({ code: 1, signal: null });
      expect(ended.output).toContain('error Second signal while shutting down; exiting');
    }, 30_000);
  });
});

describe('stopStep', () => {
  afterEach(() => jest.useRealTimers());

  it('names a step still running after five seconds, and says nothing of a quick one', async () => {
    jest.useFakeTimers();
    const warn = jest.fn();
    let finish = (): void => undefined;
    const slow = stopStep({ warn }, 'bus', () => new Promise<void>((resolve) => (finish = resolve)));
    jest.advanceTimersByTime(SLOW_STOP_STEP_MS - 1);
    expect(warn).not.toHaveBeenCalled();
    jest.advanceTimersByTime(1);
    expect(warn).toHaveBeenCalledWith({ step: 'bus' }, 'Still stopping');
    finish();
    await slow;
    await stopStep({ warn }, 'health server', async () => undefined);
    jest.advanceTimersByTime(2 * SLOW_STOP_STEP_MS);
    expect(warn).toHaveBeenCalledTimes(1);
  });

  it('passes a failing step on', async () => {
    await expect(stopStep({ warn: jest.fn() }, 'service', () => Promise.reject(new Error('pool would not end')))).rejects.toThrow('pool would not end');
  });
});
