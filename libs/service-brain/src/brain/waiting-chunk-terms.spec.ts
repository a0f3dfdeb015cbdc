import { type StoredChunkTerms, WAITING_TERMS_STALE_MS, WaitingChunkTerms } from './waiting-chunk-terms';

const TENANT = '00000000-0000-4000-8000-000000000001';
const OTHER = '00000000-0000-4000-8000-000000000002';

function chunk(seq: number, hashes = [0, 1, 0, 2, -1, 3], frequencies = [1, 1, 2]): StoredChunkTerms {
  return { seq, id: `chunk-${seq}`, length: 4, hashes: Int32Array.from(hashes), frequencies: Int32Array.from(frequencies) };
}

describe('WaitingChunkTerms', () => {
  it('hands a kept chunk over once, for its own tenant and id only', () => {
    const waiting = new WaitingChunkTerms();
    const stored = chunk(7);
    waiting.add(TENANT, [stored, chunk(8), chunk(9)]);
    expect(waiting.size).toBe(3);
    expect(waiting.take(TENANT, 10, 'chunk-10')).toBeUndefined();
    expect(waiting.take(TENANT, 7, 'chunk-7')).toBe(stored);
    expect(waiting.take(TENANT, 7, 'chunk-7')).toBeUndefined();
    // Another tenant, or the same seq as another chunk (given again by a restored database): nothing, and the entry is gone.
    expect(waiting.take(OTHER, 8, 'chunk-8')).toBeUndefined();
    expect(waiting.take(TENANT, 8, 'chunk-8')).toBeUndefined();
    expect(waiting.take(TENANT, 9, 'another-chunk')).toBeUndefined();
    expect(waiting.take(TENANT, 9, 'chunk-9')).toBeUndefined();
    expect(waiting.size).toBe(0);
  });

  it('counts the bytes it holds and gives them back as chunks are taken or cleared', () => {
    const waiting = new WaitingChunkTerms();
    waiting.add(TENANT, [chunk(1), chunk(2)]);
    const two = waiting.bytes;
    expect(two).toBeGreaterThan(2 * (6 * 4 + 3 * 4));
    waiting.take(TENANT, 1, 'chunk-1');
    expect(waiting.bytes).toBe(two / 2);
    waiting.clear();
    expect(waiting.bytes).toBe(0);
    expect(waiting.size).toBe(0);
  });

  it('when full keeps what it holds (merges take the oldest first) unless that has gone stale, and keeps none with a bound of zero', () => {
    const one = new WaitingChunkTerms();
    one.add(TENANT, [chunk(1)]);
    const bound = one.bytes * 3;
    const waiting = new WaitingChunkTerms(bound);
    waiting.add(TENANT, [chunk(1), chunk(2), chunk(3)], 0);
    waiting.add(OTHER, [chunk(4), chunk(5)], WAITING_TERMS_STALE_MS - 1);
    expect(waiting.size).toBe(3);
    expect(waiting.take(OTHER, 4, 'chunk-4')).toBeUndefined();
    // A minute on, the oldest make room, one for each new chunk.
    waiting.add(OTHER, [chunk(6), chunk(7)], WAITING_TERMS_STALE_MS);
    expect(waiting.bytes).toBeLessThanOrEqual(bound);
    expect(waiting.take(TENANT, 1, 'chunk-1')).toBeUndefined();
    expect(waiting.take(TENANT, 2, 'chunk-2')).toBeUndefined();
    expect(waiting.take(TENANT, 3, 'chunk-3')).toBeDefined();
    expect(waiting.take(OTHER, 6, 'chunk-6')).toBeDefined();
    expect(waiting.take(OTHER, 7, 'chunk-7')).toBeDefined();

    const none = new WaitingChunkTerms(0);
    none.add(TENANT, [chunk(1)]);
    expect(none.size).toBe(0);
    expect(none.take(TENANT, 1, 'chunk-1')).toBeUndefined();
  });

  it('keeps a chunk added again once, counted once', () => {
    const waiting = new WaitingChunkTerms();
    waiting.add(TENANT, [chunk(1)]);
    const once = waiting.bytes;
    waiting.add(TENANT, [chunk(1, [0, 4], [1])]);
    expect(waiting.size).toBe(1);
    expect(waiting.bytes).toBeLessThan(once);
    expect([...(waiting.take(TENANT, 1, 'chunk-1')?.hashes ?? [])]).toEqual([0, 4]);
  });

  it("counts the arrays a document's chunks share once, from the first chunk kept to the last one taken or let go", () => {
    // Three chunks whose arrays are views of one document's, as the analysis threads hand them over.
    const hashes = new Int32Array(3_000);
    const frequencies = new Int32Array(1_500);
    const view = (seq: number): StoredChunkTerms => ({
      seq,
      id: `chunk-${seq}`,
      length: 4,
      hashes: hashes.subarray(1_000 * (seq - 1), 1_000 * seq),
      frequencies: frequencies.subarray(500 * (seq - 1), 500 * seq),
    });
    const waiting = new WaitingChunkTerms();
    waiting.add(TENANT, [view(1)]);
    const first = waiting.bytes;
    expect(first).toBeGreaterThan(hashes.byteLength + frequencies.byteLength);
    waiting.add(TENANT, [view(2), view(3)]);
    const perChunk = (waiting.bytes - first) / 2;
    expect(perChunk).toBeLessThan(1_000);
    expect(waiting.take(TENANT, 1, 'chunk-1')).toBeDefined();
    expect(waiting.take(TENANT, 2, 'chunk-2')).toBeDefined();
    // The document's arrays are held while any of its chunks is.
    expect(waiting.bytes).toBe(first);
    expect(waiting.take(TENANT, 3, 'chunk-3')).toBeDefined();
    expect(waiting.bytes).toBe(0);

    // Not kept when the document's arrays do not fit, however small each chunk's share of them.
    const small = new WaitingChunkTerms(first - 1);
    small.add(TENANT, [view(1), view(2)]);
    expect(small.size).toBe(0);
    expect(small.bytes).toBe(0);
    // Letting stale chunks go gives their document's arrays back once the last of them has gone.
    const bounded = new WaitingChunkTerms(first + perChunk);
    bounded.add(TENANT, [view(1), view(2)], 0);
    expect(bounded.size).toBe(2);
    bounded.add(
      OTHER,
      [
        chunk(
          9,
          Array.from({ length: 1_000 }, (_, n) => n),
          Array.from({ length: 500 }, () => 1),
        ),
      ],
      WAITING_TERMS_STALE_MS,
    );
    expect(bounded.take(TENANT, 1, 'chunk-1')).toBeUndefined();
    expect(bounded.take(TENANT, 2, 'chunk-2')).toBeUndefined();
    expect(bounded.take(OTHER, 9, 'chunk-9')).toBeDefined();
    expect(bounded.bytes).toBe(0);
  });

  it('refuses a bound that is not a whole number of bytes', () => {
    expect(() => new WaitingChunkTerms(-1)).toThrow(RangeError);
    expect(() => new WaitingChunkTerms(1.5)).toThrow(RangeError);
    expect(() => new WaitingChunkTerms(Number.NaN)).toThrow(RangeError);
  });
});
