import { ExpirySweep } from './expiry-sweep';

// The sweep's timers run on jest's fake clock: what a pass does and when the next one comes is
// checked against the time the test moves, not against how promptly a busy machine fires timers.
describe('ExpirySweep', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => {
    jest.clearAllTimers();
    jest.useRealTimers();
  });

  it('passes again at once while a pass fills its batch, then waits its interval', async () => {
    const calls: number[] = [];
    // Due items found by each pass (another replica may have expired some of them: only what was due counts).
    const answers = [3, 3, 1];
    const sweep = new ExpirySweep(
      { expireDue: async (max) => (calls.push(max), { due: answers.shift() ?? 0, expired: 0 }) },
      { intervalMs: 10_000, batch: 3, onError: () => undefined },
    );
    sweep.start();
    await jest.advanceTimersByTimeAsync(100);
    // Two full passes, then one that was not: the next comes only after 10 s.
    expect(calls).toEqual([3, 3, 3]);
    await jest.advanceTimersByTimeAsync(9_800);
    expect(calls).toEqual([3, 3, 3]);
    await jest.advanceTimersByTimeAsync(200);
    expect(calls).toEqual([3, 3, 3, 3]);
    await sweep.stop();
  });

  it('reports a failing pass and goes on with the next', async () => {
    const errors: unknown[] = [];
    let passes = 0;
    const sweep = new ExpirySweep(
      {
        expireDue: async () => {
          passes++;
          if (passes === 1) throw new Error('database down');
          return { due: 0, expired: 0 };
        },
      },
      { intervalMs: 20, onError: (error) => errors.push(error) },
    );
    sweep.start();
    await jest.advanceTimersByTimeAsync(1);
    expect(passes).toBe(1);
    expect(errors).toEqual([new Error('database down')]);
    await jest.advanceTimersByTimeAsync(20);
    await sweep.stop();
    expect(errors).toEqual([new Error('database down')]);
    expect(passes).toBe(2);
  });

  it('runs no pass after stop, and stop waits for the pass under way', async () => {
    let running = 0;
    let finished = 0;
    const sweep = new ExpirySweep(
      {
        expireDue: async () => {
          running++;
          await new Promise((resolve) => setTimeout(resolve, 50));
          finished++;
          return { due: 0, expired: 0 };
        },
      },
      { intervalMs: 5, onError: () => undefined },
    );
    sweep.start();
    await jest.advanceTimersByTimeAsync(10);
    expect({ running, finished }).toEqual({ running: 1, finished: 0 });
    let stopped = false;
    const stopping = sweep.stop().then(() => (stopped = true));
    // The pass began at once and takes 50 ms.
    await jest.advanceTimersByTimeAsync(30);
    expect(stopped).toBe(false);
    await jest.advanceTimersByTimeAsync(30);
    await stopping;
    expect({ running, finished }).toEqual({ running: 1, finished: 1 });
    await jest.advanceTimersByTimeAsync(1_000);
    expect(running).toBe(1);
  });
});
