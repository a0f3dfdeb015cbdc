import { CommitPosition, Dispatcher, InFlightLimit, PartitionProgress } from './dispatch';

interface Msg {
  readonly topic: string;
  readonly partition: number;
  readonly offset: string;
  readonly key: string;
}

/** A handler whose calls finish only when the test says so. */
function controlled() {
  const started: string[] = [];
  const gates = new Map<string, { resolve: () => void; reject: (error: unknown) => void }>();
  const handle = (message: Msg): Promise<void> =>
    new Promise<void>((resolve, reject) => {
      started.push(message.offset);
      gates.set(message.offset, { resolve, reject });
    });
  const finish = async (offset: string, error?: unknown): Promise<void> => {
    const gate = gates.get(offset);
    if (!gate) throw new Error(`${offset} has not started`);
    if (error) gate.reject(error);
    else gate.resolve();
    await flush();
  };
  return { started, handle, finish };
}

const flush = async (): Promise<void> => {
  for (let i = 0; i < 10; i++) await Promise.resolve();
};

const batch = (...keys: string[]): Msg[] => keys.map((key, index) => ({ topic: 't', partition: 0, offset: String(100 + index), key }));

class Interrupted extends Error {}

describe('InFlightLimit', () => {
  it('admits up to its maximum and serves waiters in arrival order', async () => {
    const limit = new InFlightLimit(2);
    const order: number[] = [];
    await limit.acquire();
    await limit.acquire();
    const third = limit.acquire().then(() => order.push(3));
    const fourth = limit.acquire().then(() => order.push(4));
    await flush();
    expect(order).toEqual([]);
    expect(limit.queued).toBe(2);
    limit.release();
    await third;
    limit.release();
    await fourth;
    expect(order).toEqual([3, 4]);
    expect(limit.inUse).toBe(2);
    limit.release();
    limit.release();
    expect(limit.inUse).toBe(0);
  });

  it('refuses a limit that is not a positive integer', () => {
    expect(() => new InFlightLimit(0)).toThrow(/positive integer/);
    expect(() => new InFlightLimit(1.5)).toThrow(/positive integer/);
  });
});

describe('PartitionProgress', () => {
  it('commits the lowest offset not finished, or one past the last finished', () => {
    const progress = new PartitionProgress();
    expect(progress.position()).toBeUndefined();
    for (const offset of [5n, 6n, 7n]) expect(progress.begin(offset)).toBe(true);
    expect(progress.position()).toBe(5n);
    progress.finish(6n);
    expect(progress.position()).toBe(5n);
    progress.finish(5n);
    expect(progress.position()).toBe(7n);
    progress.finish(7n);
    expect(progress.position()).toBe(8n);
    expect(progress.open).toBe(0);
  });

  it('takes nothing twice while it runs or once done, and a failed offset again', () => {
    const progress = new PartitionProgress();
    progress.begin(10n);
    progress.begin(11n);
    progress.finish(10n);
    expect(progress.begin(10n)).toBe(false);
    expect(progress.begin(11n)).toBe(false);
    progress.fail(11n);
    expect(progress.position()).toBe(11n);
    expect(progress.firstFailed()).toBe(11n);
    expect(progress.begin(11n)).toBe(true);
    progress.finish(11n);
    expect(progress.position()).toBe(12n);
  });

  it('copes with gaps between offsets', () => {
    const progress = new PartitionProgress();
    progress.begin(3n);
    progress.begin(9n);
    progress.finish(3n);
    expect(progress.position()).toBe(9n);
    progress.finish(9n);
    expect(progress.position()).toBe(10n);
  });
});

describe('Dispatcher', () => {
  function dispatcher(options: { limit?: number; taken?: number; keyed?: boolean } = {}) {
    const { started, handle, finish } = controlled();
    const commits: CommitPosition[][] = [];
    const rewinds: string[] = [];
    const limit = new InFlightLimit(options.limit ?? 10);
    const taken = new InFlightLimit(options.taken ?? options.limit ?? 10);
    const instance: Dispatcher<Msg> = new Dispatcher<Msg>({
      limit,
      taken,
      orderKey: options.keyed ? (m) => m.key : undefined,
      handle,
      isInterruption: (error) => error instanceof Interrupted,
      commit: async (positions) => {
        commits.push(positions);
      },
      rewind: (topic, partition) => {
        rewinds.push(instance.firstFailed(topic, partition) ?? 'none');
      },
    });
    const committed = (): string | undefined => commits.at(-1)?.find((p) => p.partition === 0)?.offset;
    return { instance, started, finish, commits, committed, rewinds, limit, taken };
  }

  it('runs unkeyed messages side by side and commits up to the lowest one not finished', async () => {
    const { instance, started, finish, committed } = dispatcher();
    for (const message of batch('a', 'b', 'c')) await instance.take(message);
    expect(started).toEqual(['100', '101', '102']);
    await finish('102');
    await finish('101');
    expect(committed()).toBe('100');
    await finish('100');
    expect(committed()).toBe('103');
    await instance.drain();
  });

  it('keeps the order of one key and runs other keys beside it', async () => {
    const { instance, started, finish } = dispatcher({ keyed: true });
    for (const message of batch('k1', 'k2', 'k1', 'k2')) await instance.take(message);
    expect(started).toEqual(['100', '101']);
    await finish('101');
    expect(started).toEqual(['100', '101', '103']);
    await finish('100');
    expect(started).toEqual(['100', '101', '103', '102']);
    await finish('103');
    await finish('102');
    await instance.drain();
    expect(instance.inFlight).toBe(0);
  });

  it('makes taking wait once the taken limit is full: that is what holds the next fetch', async () => {
    const { instance, finish, taken: limit } = dispatcher({ limit: 2 });
    const [a, b, c] = batch('a', 'b', 'c');
    await instance.take(a);
    await instance.take(b);
    let third = false;
    const taking = instance.take(c).then(() => (third = true));
    await flush();
    expect(third).toBe(false);
    expect(limit.queued).toBe(1);
    await finish('100');
    await taking;
    expect(third).toBe(true);
    await finish('101');
    await finish('102');
    await instance.drain();
  });

  it('does not take a message again that runs or finished (read again after a rebalance)', async () => {
    const { instance, started, finish } = dispatcher();
    const [a, b] = batch('a', 'b');
    await instance.take(a);
    await instance.take(b);
    await finish('100');
    await instance.take(a);
    await instance.take(b);
    expect(started).toEqual(['100', '101']);
    await finish('101');
    await instance.drain();
  });

  it('on a failure: rewinds to it, fails the later messages of its key until it is read again, lets other keys go on', async () => {
    const { instance, started, finish, committed, rewinds } = dispatcher({ keyed: true });
    const [k1, k1Later, k2] = batch('k1', 'k1', 'k2');
    for (const message of [k1, k1Later, k2]) await instance.take(message);
    await finish('100', new Error('dead letter could not be sent'));
    expect(rewinds).toEqual(['100']);
    await finish('102');
    expect(committed()).toBe('100');
    // A later message of k1 fetched before the rewind took effect does not run either.
    const k1Newer = { topic: 't', partition: 0, offset: '103', key: 'k1' };
    await instance.take(k1Newer);
    expect(started).toEqual(['100', '102']);
    // Read again from the failed offset: everything of k1 runs, in order.
    for (const message of [k1, k1Later, k2, k1Newer]) await instance.take(message);
    expect(started).toEqual(['100', '102', '100']);
    await finish('100');
    await finish('101');
    await finish('103');
    expect(started).toEqual(['100', '102', '100', '101', '103']);
    expect(committed()).toBe('104');
    await instance.drain();
  });

  it('leaves an interrupted message uncommitted without rewinding', async () => {
    const { instance, finish, committed, rewinds } = dispatcher();
    const [a, b] = batch('a', 'b');
    await instance.take(a);
    await instance.take(b);
    await finish('101');
    await finish('100', new Interrupted('closing'));
    await instance.drain();
    expect(rewinds).toEqual([]);
    expect(committed()).toBe('100');
  });

  it('retries a failed commit, and drain commits what finished', async () => {
    let failures = 1;
    const commits: string[] = [];
    const errors: unknown[] = [];
    const instance = new Dispatcher<Msg>({
      limit: new InFlightLimit(4),
      taken: new InFlightLimit(4),
      handle: async () => undefined,
      isInterruption: () => false,
      commit: async (positions) => {
        if (failures-- > 0) throw new Error('rebalancing');
        commits.push(positions[0].offset);
      },
      rewind: () => undefined,
      onCommitError: (error) => errors.push(error),
      commitRetryMs: 5,
    });
    await instance.take(batch('a')[0]);
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(errors).toHaveLength(1);
    expect(commits).toEqual(['101']);
    await instance.drain();
  });

  it('commits at most once per commit interval, and drain commits at once', async () => {
    const commits: string[] = [];
    const instance = new Dispatcher<Msg>({
      limit: new InFlightLimit(8),
      taken: new InFlightLimit(8),
      handle: async () => undefined,
      isInterruption: () => false,
      commit: async (positions) => {
        commits.push(positions[0].offset);
      },
      rewind: () => undefined,
      commitIntervalMs: 10_000,
    });
    const [a, b, c] = batch('a', 'b', 'c');
    await instance.take(a);
    await flush();
    expect(commits).toEqual(['101']);
    await instance.take(b);
    await instance.take(c);
    await flush();
    expect(commits).toEqual(['101']);
    await instance.drain();
    expect(commits).toEqual(['101', '103']);
  });

  it('after a rebalance: no longer blocks a key of a partition taken away, and runs nothing more of it', async () => {
    const { instance, started, finish, rewinds } = dispatcher({ keyed: true, taken: 3 });
    const [k1] = batch('k1');
    await instance.take(k1);
    await finish('100', new Error('dead letter could not be sent'));
    const later = { topic: 't', partition: 0, offset: '105', key: 'k1' };
    await instance.take(later);
    expect(started).toEqual(['100']);
    // Partition 1 is kept: a message queued behind its key runs; partition 0 is taken away.
    const kept = [
      { topic: 't', partition: 1, offset: '200', key: 'k2' },
      { topic: 't', partition: 1, offset: '201', key: 'k2' },
    ];
    for (const message of kept) await instance.take(message);
    instance.retain(new Set(['t\u00001']));
    await finish('200');
    await finish('201');
    expect(started).toEqual(['100', '200', '201']);
    // Back after another member had it: the blocked and failed messages are read and run again.
    instance.retain(new Set(['t\u00000', 't\u00001']));
    await instance.take(later);
    expect(started).toEqual(['100', '200', '201', '105']);
    await finish('105');
    await instance.drain();
    expect(rewinds).toEqual(['100']);
  });

  it('neither runs queued messages of a partition taken away nor blocks or rewinds when its running handler fails', async () => {
    const { instance, started, finish, rewinds } = dispatcher({ keyed: true });
    const [first, second] = [
      { topic: 't', partition: 0, offset: '100', key: 'k' },
      { topic: 't', partition: 0, offset: '101', key: 'k' },
    ];
    await instance.take(first);
    await instance.take(second);
    instance.retain(new Set());
    await finish('100', new Error('dead letter could not be sent'));
    expect(started).toEqual(['100']);
    expect(rewinds).toEqual([]);
    // Given back later: both are read again from the committed position and run in order.
    instance.retain(new Set(['t\u00000']));
    await instance.take(first);
    await instance.take(second);
    expect(started).toEqual(['100', '100']);
    await finish('100');
    expect(started).toEqual(['100', '100', '101']);
    await finish('101');
    await instance.drain();
  });

  it('rewinds to the lowest failed offset of a partition, whichever failed last', async () => {
    const { instance, finish, rewinds } = dispatcher({ keyed: true });
    for (const message of batch('a', 'b', 'c')) await instance.take(message);
    await finish('102', new Error('dead letter could not be sent'));
    await finish('100', new Error('dead letter could not be sent'));
    expect(rewinds).toEqual(['102', '100']);
    expect(instance.firstFailed('t', 0)).toBe('100');
    await finish('101');
    await instance.drain();
  });

  it('lets other keys run while one key has a queue of waiting events', async () => {
    const { instance, started, finish } = dispatcher({ keyed: true, limit: 2, taken: 8 });
    const busy = Array.from({ length: 5 }, (_, n) => ({ topic: 't', partition: 0, offset: String(100 + n), key: 'busy' }));
    for (const message of busy) await instance.take(message);
    await instance.take({ topic: 't', partition: 0, offset: '105', key: 'other' });
    expect(started).toEqual(['100', '105']);
    for (const offset of ['105', '100', '101', '102', '103', '104']) await finish(offset);
    await instance.drain();
  });

  it('orders a key within its partition only: the same key on two partitions runs side by side', async () => {
    const { instance, started, finish } = dispatcher({ keyed: true });
    await instance.take({ topic: 't', partition: 0, offset: '100', key: 'k' });
    await instance.take({ topic: 't', partition: 1, offset: '200', key: 'k' });
    expect(started).toEqual(['100', '200']);
    await finish('100');
    await finish('200');
    await instance.drain();
  });

  it('finishes draining when the last commit fails, reporting it', async () => {
    const errors: unknown[] = [];
    const instance = new Dispatcher<Msg>({
      limit: new InFlightLimit(2),
      taken: new InFlightLimit(2),
      handle: async () => undefined,
      isInterruption: () => false,
      commit: async () => {
        throw new Error('rebalancing');
      },
      rewind: () => undefined,
      onCommitError: (error) => errors.push(error),
      commitIntervalMs: 60_000,
    });
    await instance.take(batch('a')[0]);
    await instance.take({ topic: 't', partition: 0, offset: '101', key: 'b' });
    await expect(instance.drain()).resolves.toBeUndefined();
    expect(errors.length).toBeGreaterThan(0);
  });
});
