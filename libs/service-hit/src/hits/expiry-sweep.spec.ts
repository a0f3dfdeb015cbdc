import { ExpirySweep } from './expiry-sweep';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

describe('ExpirySweep', () => {
  it('passes again at once while a pass fills its batch, then waits its interval', async () => {
    const calls: number[] = [];
    // Due items found by each pass (another replica may have expired some of them: only what was due counts).
    const answers = [3, 3, 1];
    const sweep = new ExpirySweep(
      { expireDue: async (max) => (calls.push(max), { due: answers.shift() ?? 0, expired: 0 }) },
      { intervalMs: 10_000, batch: 3, onError: () => undefined },
    );
    sweep.start();
    await sleep(100);
    await sweep.stop();
    // Two full passes, then one that was not: the next would come only after 10 s.
    expect(calls).toEqual([3, 3, 3]);
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
    await sleep(150);
    await sweep.stop();
    expect(errors).toEqual([new Error('database down')]);
    expect(passes).toBeGreaterThanOrEqual(2);
  });

  it('runs no pass after stop, and stop waits for the pass under way', async () => {
    let running = 0;
    let finished = 0;
    const sweep = new ExpirySweep(
      {
        expireDue: async () => {
          running++;
          await sleep(50);
          finished++;
          return { due: 0, expired: 0 };
        },
      },
      { intervalMs: 5, onError: () => undefined },
    );
    sweep.start();
    await sleep(10);
    await sweep.stop();
    expect(finished).toBe(running);
    const after = running;
    await sleep(50);
    expect(running).toBe(after);
  });
});
