import { compilerMsBetween, compilerTicksOf, QUIET_SLICES, SETTLE_SLICE_SECONDS, settleCompilers } from './jit';

/** A /proc/<pid>/task/<tid>/stat line: `name` with `utime` and `stime` in fields 14 and 15. */
function stat(tid: number, name: string, utime: number, stime: number): string {
  const after = ['S', '1', '1', '0', '0', '-1', '4194560', '10', '0', '0', '0', String(utime), String(stime), '0', '0', '20', '0', '40', '0', '12345'];
  return `${tid} (${name}) ${after.join(' ')}`;
}

describe('the JVM compiler threads read from /proc', () => {
  it('reads the C1 and C2 compiler threads only, each by its id, whatever the other threads are called', () => {
    const stats = [
      stat(1, 'java', 500, 100),
      stat(2, 'C2 CompilerThre', 300, 20),
      stat(3, 'C1 CompilerThre', 40, 2),
      stat(4, 'data-plane-kafk', 900, 300),
      // A name holding a parenthesis and a space must not shift the fields.
      stat(6, 'C2 CompilerThre) 9', 10, 0),
    ];
    expect(compilerTicksOf(stats)).toEqual(
      new Map([
        ['2', 320],
        ['3', 42],
        ['6', 10],
      ]),
    );
  });

  it('counts what each thread used between two readings, a thread that ended losing nothing and a new one counting from 0', () => {
    const before = new Map([
      ['2', 1_000],
      ['3', 200],
      ['7', 5_000],
    ]);
    // Thread 7 (an extra C2 thread) ended; thread 8 started.
    const after = new Map([
      ['2', 1_300],
      ['3', 200],
      ['8', 40],
    ]);
    expect(compilerMsBetween(before, after)).toBe(300 + 40);
  });

  it('is null when the process has no compiler thread (not a JVM) or nothing could be read', () => {
    expect(compilerTicksOf([stat(1, 'node', 5, 5), 'garbage'])).toBeNull();
    expect(compilerTicksOf([])).toBeNull();
  });
});

/** A fake clock and compilers that use `percents[i]` % of a core during slice i. */
function fakeBroker(percents: readonly number[]) {
  let clock = 0;
  let compilerMs = 0;
  let slice = 0;
  const logs: string[] = [];
  return {
    logs,
    slices: () => slice,
    options: (maxSeconds: number) => ({
      maxSeconds,
      label: 'distributed',
      now: () => clock,
      compilerMs: () => new Map([['11', compilerMs]]),
      log: (message: string) => logs.push(message),
      load: async (seconds: number) => {
        const ms = seconds * 1000;
        compilerMs += ((percents[slice] ?? 0) / 100) * ms;
        clock += ms;
        slice++;
      },
    }),
  };
}

describe('waiting for a fresh broker’s compilers', () => {
  it(`settles only once ${QUIET_SLICES} slices together are quiet, not at a lull between bursts`, async () => {
    const broker = fakeBroker([60, 40, 2, 50, 30, 3, 1, 2, 0]);
    const settle = await settleCompilers(broker.options(240));
    expect(settle).toEqual({ seconds: 8 * SETTLE_SLICE_SECONDS, settled: true, compilerPercent: [60, 40, 2, 50, 30, 3, 1, 2], windowPercent: 2 });
    expect(broker.slices()).toBe(8);
    expect(broker.logs.at(-1)).toMatch(/quiet \(2% of a core over 15 s\) after 40 s/);
  });

  it('measures anyway after the most seconds it may spend, and says so', async () => {
    const broker = fakeBroker(Array.from({ length: 100 }, () => 20));
    const settle = await settleCompilers(broker.options(30));
    expect(settle).toMatchObject({ seconds: 30, settled: false, windowPercent: 20 });
    expect(broker.slices()).toBe(6);
    expect(broker.logs.at(-1)).toMatch(/still use 20% of a core after 30 s of load; measuring anyway/);
  });

  it('does not wait when told not to, or when the compilers cannot be read', async () => {
    const none = fakeBroker([50]);
    expect(await settleCompilers(none.options(0))).toBeNull();
    expect(none.slices()).toBe(0);
    const unreadable = fakeBroker([50]);
    expect(await settleCompilers({ ...unreadable.options(240), compilerMs: () => null })).toBeNull();
    expect(unreadable.slices()).toBe(0);
    expect(unreadable.logs).toEqual(["distributed: cannot read the broker's compiler threads; not waiting for them"]);
  });
});
