import fc from 'fast-check';
import { Fifo } from './fifo';

describe('Fifo', () => {
  it('gives the items back in the order they came, through any mix of pushes and shifts', () => {
    fc.assert(
      // Plain comparisons in the loop (a property that is false fails the run and shrinks): jest's
      // expect per operation made this test take most of a minute.
      fc.property(fc.array(fc.oneof(fc.integer(), fc.constant('shift' as const)), { maxLength: 5_000, size: 'max' }), (operations) => {
        const fifo = new Fifo<number>();
        const reference: number[] = [];
        for (const operation of operations) {
          if (operation === 'shift') {
            if (fifo.peek() !== reference[0] || fifo.shift() !== reference.shift()) return false;
          } else {
            fifo.push(operation);
            reference.push(operation);
          }
          if (fifo.length !== reference.length) return false;
        }
        return true;
      }),
    );
  });

  it('keeps its order across the copies that drop what was taken', () => {
    const fifo = new Fifo<number>();
    let next = 0;
    let expected = 0;
    // Long enough for several compactions while the queue never empties.
    // The first item out of order, if any (one expect at the end: one per item took seconds).
    let outOfOrder: { expected: number; got: number | undefined } | undefined;
    const take = (): void => {
      const got = fifo.shift();
      if (got !== expected && outOfOrder === undefined) outOfOrder = { expected, got };
      expected++;
    };
    for (let round = 0; round < 50_000; round++) {
      fifo.push(next++);
      fifo.push(next++);
      take();
    }
    while (fifo.length > 0) take();
    expect(outOfOrder).toBeUndefined();
    expect(expected).toBe(next);
    expect(fifo.shift()).toBeUndefined();
  });

  it('drops the slots of taken items instead of growing for ever', () => {
    const fifo = new Fifo<number>();
    fifo.push(-1);
    for (let round = 0; round < 100_000; round++) {
      fifo.push(round);
      fifo.shift();
    }
    // One item waits throughout: what the queue holds stays near its compaction threshold.
    expect((fifo as unknown as { items: unknown[] }).items.length).toBeLessThanOrEqual(2 * 1024 + 1);
    expect(fifo.length).toBe(1);
  });
});
