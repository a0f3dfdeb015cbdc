import fc from 'fast-check';
import { type ChunkTerms, encodeSegment, groupByTerm } from '../ranking/postings';
import { mergeSegments, packChunkTerms, packedSegmentsOf, unpackChunkTerms, unpackSegments } from './merge-segments';

/** What a merge computed on the service's thread before merge-segments.ts: one object and one Buffer per term. */
function reference(batch: readonly ChunkTerms[]) {
  return groupByTerm(batch).map((list) => ({
    high: list.high,
    low: list.low,
    first: list.seqs[0] as number,
    last: list.seqs[list.seqs.length - 1] as number,
    size: list.seqs.length,
    bytes: encodeSegment(list.seqs, list.frequencies, list.lengths),
  }));
}

/** Halves from a small pool (terms shared between chunks, a chunk listing one twice) or any 32-bit pair. */
const half = fc.oneof(fc.integer({ min: -3, max: 3 }), fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }));
const batches = fc
  .array(
    fc.record({
      length: fc.oneof(fc.integer({ min: 0, max: 400 }), fc.integer({ min: 0, max: 2 ** 31 - 1 })),
      terms: fc.array(fc.tuple(half, half, fc.integer({ min: 1, max: 2 ** 20 })), { maxLength: 30 }),
      gap: fc.oneof(fc.integer({ min: 1, max: 9 }), fc.integer({ min: 1, max: 2 ** 40 })),
    }),
    { maxLength: 40 },
  )
  .map((chunks) => {
    let seq = 0;
    return chunks.map(({ length, terms, gap }): ChunkTerms => {
      seq += gap;
      return { seq, length, hashes: Int32Array.from(terms.flatMap(([high, low]) => [high, low])), frequencies: Int32Array.from(terms.map(([, , tf]) => tf)) };
    });
  });

describe('merge segments', () => {
  it('are the segments a merge wrote before, for any batch: terms, chunk ranges, sizes and bytes', () => {
    fc.assert(
      fc.property(batches, (batch) => {
        expect(mergeSegments(batch)).toEqual(reference(batch));
      }),
      { numRuns: 500 },
    );
  });

  it('come out the same through the packed form a thread receives and returns', () => {
    fc.assert(
      fc.property(batches, (batch) => {
        const packed = packChunkTerms(batch);
        // What the thread sees: views of the packed arrays, equal to the batch.
        expect(unpackChunkTerms(packed)).toEqual(batch.map((chunk) => ({ ...chunk })));
        const result = packedSegmentsOf(unpackChunkTerms(packed));
        // A structured clone, as the result crosses back.
        expect(unpackSegments(structuredClone(result))).toEqual(reference(batch));
      }),
      { numRuns: 200 },
    );
  });

  it('grow their buffer past its first guess (postings of long varints)', () => {
    // Sequence numbers near 2^52 and large frequencies and lengths: about 20 bytes a posting, five times the guess.
    const batch: ChunkTerms[] = Array.from({ length: 300 }, (_, index) => ({
      seq: 2 ** 52 + index * 2 ** 40,
      length: 2 ** 31 - 1,
      hashes: Int32Array.from([index, 7, 1, 2]),
      frequencies: Int32Array.from([2 ** 30, 2 ** 29]),
    }));
    const packed = packedSegmentsOf(batch);
    expect(packed.bytes.length).toBeGreaterThan(4 * 600);
    expect(unpackSegments(packed)).toEqual(reference(batch));
  });

  it('refuse packed arrays that do not add up', () => {
    const batch: ChunkTerms[] = [
      { seq: 5, length: 3, hashes: Int32Array.from([1, 2, 3, 4]), frequencies: Int32Array.from([1, 2]) },
      { seq: 9, length: 1, hashes: Int32Array.from([1, 2]), frequencies: Int32Array.from([4]) },
    ];
    expect(() => packChunkTerms([{ seq: 1, length: 1, hashes: Int32Array.from([1, 2, 3]), frequencies: Int32Array.from([1]) }])).toThrow(/1.5 terms and 1 frequencies/);
    const packed = packChunkTerms(batch);
    expect(() => unpackChunkTerms({ ...packed, counts: Int32Array.from([2]) })).toThrow(/2 chunks has 2 lengths and 1 counts/);
    expect(() => unpackChunkTerms({ ...packed, counts: Int32Array.from([2, -1]) })).toThrow(/fewer than no terms/);
    expect(() => unpackChunkTerms({ ...packed, frequencies: packed.frequencies.subarray(1) })).toThrow(/counts 3 terms, and holds 2 frequencies and 6 halves/);
    const segments = packedSegmentsOf(batch);
    expect(segments.ends).toEqual(Int32Array.from([segments.ends[0]!, segments.bytes.length]));
    expect(() => unpackSegments({ ...segments, sizes: segments.sizes.subarray(1) })).toThrow(/arrays of other lengths/);
    expect(() => unpackSegments({ ...segments, ends: Int32Array.from([segments.ends[1]!, segments.ends[0]!]) })).toThrow(/segment 1 ends at/);
    expect(() => unpackSegments({ ...segments, bytes: Uint8Array.from([...segments.bytes, 0]) })).toThrow(/before its/);
    expect(() => unpackSegments({ ...segments, ends: Int32Array.from([segments.ends[0]!, segments.bytes.length + 1]) })).toThrow(/segment 1 ends at/);
    expect(mergeSegments([])).toEqual([]);
  });
});
