import { AsyncLocalStorage } from 'node:async_hooks';
import { TurnBatcher } from './batching';

describe('TurnBatcher', () => {
  it('hands on what one turn gathered, in batches of at most its size, and starts afresh the next turn', async () => {
    const batches: number[][] = [];
    const batcher = new TurnBatcher<number>(3, (batch) => batches.push(batch));
    for (let item = 1; item <= 7; item++) batcher.add(item);
    expect(batches).toEqual([]);
    await new Promise((resolve) => setImmediate(resolve));
    expect(batches).toEqual([[1, 2, 3], [4, 5, 6], [7]]);
    batcher.add(8);
    await new Promise((resolve) => setImmediate(resolve));
    expect(batches).toEqual([[1, 2, 3], [4, 5, 6], [7], [8]]);
  });

  it('hands batches on in its own context, not in that of the caller that came first', async () => {
    const storage = new AsyncLocalStorage<string>();
    const seen: Array<string | undefined> = [];
    const batcher = new TurnBatcher<number>(10, () => seen.push(storage.getStore()));
    storage.run('first caller', () => batcher.add(1));
    storage.run('second caller', () => batcher.add(2));
    await new Promise((resolve) => setImmediate(resolve));
    expect(seen).toEqual([undefined]);
    const traced: Array<string | undefined> = [];
    const underFirst = new TurnBatcher<number>(10, () => traced.push(storage.getStore()), { firstCallerContext: true });
    storage.run('first caller', () => underFirst.add(1));
    storage.run('second caller', () => underFirst.add(2));
    await new Promise((resolve) => setImmediate(resolve));
    expect(traced).toEqual(['first caller']);
  });

  it('refuses a batch size that is not a positive integer', () => {
    for (const size of [0, -1, 1.5, Number.NaN]) expect(() => new TurnBatcher(size, () => undefined)).toThrow(RangeError);
  });
});
