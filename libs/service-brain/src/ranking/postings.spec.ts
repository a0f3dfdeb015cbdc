import fc from 'fast-check';
import { hashPair, hashText } from '../index/term-hashes';
import {
  contribution,
  decodePostings,
  type EncodedSegments,
  encodePostings,
  encodeSegment,
  encodeSegmentsByTerm,
  forEachPosting,
  ScoreTable,
  selectSegments,
  wholeNumbers,
} from './postings';

/** Postings of distinct chunks, in any order: chunk numbers up to 2^53 − 1, frequencies and lengths of any size the columns hold. */
const postingsArbitrary = fc
  .uniqueArray(
    fc.record({
      seq: fc.oneof(
        fc.integer({ min: 1, max: 5_000 }),
        fc.maxSafeNat().filter((n) => n > 0),
      ),
      tf: fc.oneof(fc.integer({ min: 1, max: 4 }), fc.integer({ min: 1, max: 2 ** 31 - 1 })),
      length: fc.oneof(fc.integer({ min: 0, max: 300 }), fc.integer({ min: 0, max: 2 ** 31 - 1 })),
    }),
    { minLength: 1, maxLength: 200, selector: (posting) => posting.seq },
  )
  .map((postings) => ({ seqs: postings.map((p) => p.seq), frequencies: postings.map((p) => p.tf), lengths: postings.map((p) => p.length) }));

const sortedBySeq = (postings: { seqs: number[]; frequencies: number[]; lengths: number[] }): Array<[number, number, number]> =>
  postings.seqs.map((seq, index): [number, number, number] => [seq, postings.frequencies[index]!, postings.lengths[index]!]).sort((a, b) => a[0] - b[0]);

const normalisation = { constant: 0.3, perTerm: 0.9 / 57.3 };

describe('posting blocks', () => {
  it('give back every posting, segment after segment, whatever the numbers', () => {
    fc.assert(
      fc.property(fc.array(postingsArbitrary, { minLength: 1, maxLength: 4 }), (segments) => {
        const block = Buffer.concat(segments.map((segment) => encodePostings(segment)));
        const decoded = decodePostings(block);
        expect(decoded).toEqual({
          seqs: segments.flatMap((segment) => sortedBySeq(segment).map((p) => p[0])),
          frequencies: segments.flatMap((segment) => sortedBySeq(segment).map((p) => p[1])),
          lengths: segments.flatMap((segment) => sortedBySeq(segment).map((p) => p[2])),
        });
      }),
    );
  });

  it('take three or four bytes for a posting of a common word', () => {
    // A word in every third chunk, a few times per chunk, chunks of a couple of hundred terms.
    const seqs = Array.from({ length: 4_096 }, (_, index) => 1_000_000 + 3 * index);
    const block = encodeSegment(
      seqs,
      seqs.map((_, index) => 1 + (index % 3)),
      seqs.map((_, index) => 150 + (index % 100)),
    );
    expect(block.length / seqs.length).toBeGreaterThanOrEqual(3);
    expect(block.length / seqs.length).toBeLessThan(4.01);
  });

  it('refuse what is not a segment: no postings, chunks out of order or repeated, frequencies below one, fractions, mismatched lists', () => {
    expect(() => encodeSegment([], [], [])).toThrow(RangeError);
    expect(() => encodeSegment([5, 3], [1, 1], [9, 9])).toThrow(/chunk/);
    expect(() => encodeSegment([5, 5], [1, 1], [9, 9])).toThrow(/chunk/);
    expect(() => encodeSegment([0], [1], [9])).toThrow(/chunk/);
    expect(() => encodeSegment([5], [0], [9])).toThrow(/frequency/);
    expect(() => encodeSegment([5], [1], [-1])).toThrow(/length/);
    expect(() => encodeSegment([5], [1.5], [9])).toThrow(/frequency/);
    expect(() => encodeSegment([2 ** 53], [1], [9])).toThrow(/chunk/);
    expect(() => encodeSegment([5, 6], [1], [9, 9])).toThrow(/as many/);
  });

  it('refuse a block cut short or holding a number past 2^53, both when decoded and when scored', () => {
    const block = encodeSegment([70_000, 70_300], [2, 1], [180, 200]);
    for (let cut = 1; cut < block.length; cut++) {
      const truncated = block.subarray(0, cut);
      expect(() => decodePostings(truncated)).toThrow(RangeError);
      expect(() => new ScoreTable(4).addBlock(truncated, 1, normalisation)).toThrow(RangeError);
    }
    const oversized = Buffer.from([1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 1, 1]);
    expect(() => decodePostings(oversized)).toThrow(/too large/);
    expect(() => new ScoreTable(4).addBlock(oversized, 1, normalisation)).toThrow(/too large/);
    expect(() => decodePostings(Buffer.from([0]))).toThrow(/empty segment/);
    expect(() => new ScoreTable(4).addBlock(Buffer.from([0]), 1, normalisation)).toThrow(/empty segment/);
  });

  it('sum per chunk what each term contributes, exactly as posting by posting, through any growth of the table', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(postingsArbitrary, fc.double({ min: 0.01, max: 50, noNaN: true })), { minLength: 1, maxLength: 5 }),
        fc.integer({ min: 0, max: 300 }),
        (terms, expected) => {
          const table = new ScoreTable(expected);
          const reference = new Map<number, number>();
          for (const [postings, weight] of terms) {
            table.addBlock(encodePostings(postings), weight, normalisation);
            forEachPosting(encodePostings(postings), (seq, tf, length) => reference.set(seq, (reference.get(seq) ?? 0) + contribution(weight, tf, length, normalisation)));
          }
          const sums = new Map<number, number>();
          table.forEach((seq, sum) => sums.set(seq, sum));
          expect(sums).toEqual(reference);
          expect(table.size).toBe(reference.size);
        },
      ),
    );
  });

  it('rank the best chunks first, a tie to the chunk indexed first, as sorting them all would', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.integer({ min: 1, max: 2_000 }), fc.integer({ min: 0, max: 20 })), { maxLength: 400 }),
        fc.integer({ min: 0, max: 50 }),
        (entries, limit) => {
          const table = new ScoreTable(8);
          for (const [seq, amount] of entries) table.add(seq, amount);
          const all: Array<{ seq: number; sum: number }> = [];
          table.forEach((seq, sum) => all.push({ seq, sum }));
          all.sort((a, b) => b.sum - a.sum || a.seq - b.seq);
          expect(table.top(limit)).toEqual(all.slice(0, limit));
        },
      ),
    );
  });

  it('round a contribution as PostgreSQL rounds a float8: half to even, the same integer as SQL computes', () => {
    // weight · tf / (tf + constant + perTerm · length) · 1e9 = 0.5, 2.5 and 6.5 exactly: to the even neighbour.
    expect(contribution(0.5e-9, 1, 0, { constant: 0, perTerm: 0 })).toBe(0);
    expect(contribution(2.5e-9, 1, 0, { constant: 0, perTerm: 0 })).toBe(2);
    expect(contribution(6.5e-9, 1, 0, { constant: 0, perTerm: 0 })).toBe(6);
    // Not a tie once computed (3.5e-9 · 1e9 = 3.5000000000000004): up.
    expect(contribution(3.5e-9, 1, 0, { constant: 0, perTerm: 0 })).toBe(4);
    expect(contribution(1, 1, 0, { constant: 0, perTerm: 0 })).toBe(1e9);
    expect(contribution(3.2, 2, 180, normalisation)).toBe(Math.round(((3.2 * 2) / (2 + normalisation.constant + normalisation.perTerm * 180)) * 1e9));
  });
});

describe('encodeSegmentsByTerm', () => {
  /** Term hashes as PostgreSQL writes bigints: the extremes, small ones, and any 64-bit value. */
  const termArbitrary = fc.oneof(
    fc.constantFrom('0', '-1', '1', '999999999', '1000000000', '-1000000000', '9223372036854775807', '-9223372036854775808'),
    fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }).map(String),
    fc.integer({ min: -3, max: 3 }).map(String),
  );
  const chunksArbitrary = fc
    .array(fc.record({ length: fc.integer({ min: 0, max: 400 }), terms: fc.array(fc.tuple(termArbitrary, fc.integer({ min: 1, max: 9 })), { maxLength: 30 }) }), { maxLength: 40 })
    .map((chunks) => chunks.map((chunk, index) => ({ ...chunk, seq: 1_000 + 7 * index })));

  /** Each term's postings as its segment holds them, by the term's decimal hash. */
  const decodedByTerm = (encoded: EncodedSegments): Map<string, Array<[number, number, number]>> =>
    new Map(
      Array.from({ length: encoded.count }, (_, index) => {
        const decoded = decodePostings(encoded.bytes.subarray(encoded.offsets[index], encoded.offsets[index + 1]));
        return [
          hashText(encoded.pairs[2 * index]!, encoded.pairs[2 * index + 1]!),
          decoded.seqs.map((seq, at): [number, number, number] => [seq, decoded.frequencies[at]!, decoded.lengths[at]!]),
        ];
      }),
    );

  it("gives every term its postings in chunk order, as grouping by the hashes' decimal strings does, a term listed twice in a chunk summed; each segment as encodeSegment writes it, one after the other, with the term's halves, first and last chunk and size", () => {
    fc.assert(
      fc.property(chunksArbitrary, (chunks) => {
        const expected = new Map<string, Array<[number, number, number]>>();
        for (const chunk of chunks) {
          for (const [term, tf] of chunk.terms) {
            const list = expected.get(term) ?? [];
            const last = list[list.length - 1];
            if (last && last[0] === chunk.seq) last[1] += tf;
            else list.push([chunk.seq, tf, chunk.length]);
            expected.set(term, list);
          }
        }
        const encoded = encodeSegmentsByTerm(
          chunks.map((chunk) => ({
            seq: chunk.seq,
            length: chunk.length,
            hashes: Int32Array.from(chunk.terms.flatMap(([term]) => hashPair(term))),
            frequencies: Int32Array.from(chunk.terms.map(([, tf]) => tf)),
          })),
        );
        expect(decodedByTerm(encoded)).toEqual(expected);
        expect(encoded.count).toBe(expected.size);
        expect(encoded.offsets).toHaveLength(encoded.count + 1);
        expect(encoded.offsets[0]).toBe(0);
        expect(encoded.offsets[encoded.count]).toBe(encoded.bytes.length);
        for (let index = 0; index < encoded.count; index++) {
          const list = expected.get(hashText(encoded.pairs[2 * index]!, encoded.pairs[2 * index + 1]!))!;
          const segment = encodeSegment(
            list.map(([seq]) => seq),
            list.map(([, tf]) => tf),
            list.map(([, , length]) => length),
          );
          expect(encoded.bytes.subarray(encoded.offsets[index], encoded.offsets[index + 1]).equals(segment)).toBe(true);
          expect([encoded.firsts[index], encoded.lasts[index], encoded.sizes[index]]).toEqual([list[0]![0], list[list.length - 1]![0], list.length]);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('encodes chunk numbers and lengths of every size a varint takes, and refuses what encodeSegment refuses', () => {
    const big = [1, 127, 128, 16_383, 16_384, 2 ** 21, 2 ** 35, Number.MAX_SAFE_INTEGER - 1];
    const chunkLengths = [2 ** 30, 2 ** 21, 16_384, 16_383, 128, 127, 1, 0];
    const input = big.map((seq, index) => ({ seq, length: chunkLengths[index]!, hashes: Int32Array.from([0, 7]), frequencies: Int32Array.from([1 + index * 1_000]) }));
    const encoded = encodeSegmentsByTerm(input);
    expect(
      encoded.bytes.equals(
        encodeSegment(
          big,
          input.map((chunk) => chunk.frequencies[0]!),
          input.map((chunk) => chunk.length),
        ),
      ),
    ).toBe(true);
    expect(decodePostings(encoded.bytes).seqs).toEqual(big);
    const bad = (seq: number, tf: number, length: number) => [{ seq, length, hashes: Int32Array.from([0, 7]), frequencies: Int32Array.from([tf]) }];
    expect(() => encodeSegmentsByTerm(bad(0, 1, 9))).toThrow(/chunk/);
    expect(() => encodeSegmentsByTerm(bad(5, 0, 9))).toThrow(/frequency/);
    expect(() => encodeSegmentsByTerm(bad(5, 1, -1))).toThrow(/length/);
    expect(() => encodeSegmentsByTerm(bad(1.5, 1, 9))).toThrow(/chunk/);
    expect(encodeSegmentsByTerm([]).count).toBe(0);
    expect(encodeSegmentsByTerm([]).bytes.length).toBe(0);
  });

  it('selects segments into a set of their own, as encoded, and refuses indices out of range or order', () => {
    const chunk = (seq: number, terms: number[]) => ({
      seq,
      length: 10 + seq,
      hashes: Int32Array.from(terms.flatMap((term) => [term, -term])),
      frequencies: Int32Array.from(terms.map(() => 2)),
    });
    const encoded = encodeSegmentsByTerm([chunk(1, [5, 6, 7]), chunk(2, [6, 8]), chunk(300, [5, 8, 9])]);
    expect(encoded.count).toBe(5);
    const picked = selectSegments(encoded, [0, 3, 4]);
    expect(picked.count).toBe(3);
    expect([...picked.pairs]).toEqual([5, -5, 8, -8, 9, -9]);
    expect([...picked.firsts]).toEqual([1, 2, 300]);
    expect([...picked.lasts]).toEqual([300, 300, 300]);
    expect([...picked.sizes]).toEqual([2, 2, 1]);
    for (const [at, index] of [0, 3, 4].entries()) {
      expect(picked.bytes.subarray(picked.offsets[at], picked.offsets[at + 1]).equals(encoded.bytes.subarray(encoded.offsets[index], encoded.offsets[index + 1]))).toBe(true);
    }
    expect(picked.offsets[3]).toBe(picked.bytes.length);
    expect(decodePostings(picked.bytes.subarray(0, picked.offsets[1])).seqs).toEqual([1, 300]);
    expect(selectSegments(encoded, []).bytes.length).toBe(0);
    for (const bad of [[5], [-1], [2, 1], [1, 1], [0.5]]) expect(() => selectSegments(encoded, bad)).toThrow(RangeError);
  });

  it('refuses a chunk whose hashes and frequencies do not match; reads PostgreSQL integer-array text exactly', () => {
    const chunk = (hashes: number[], frequencies: number[]) => [{ seq: 1, length: 3, hashes: Int32Array.from(hashes), frequencies: Int32Array.from(frequencies) }];
    expect(encodeSegmentsByTerm(chunk([], [])).count).toBe(0);
    expect(() => encodeSegmentsByTerm(chunk([0, 1, 0, 2], [1]))).toThrow(/2 terms and 1 frequencies/);
    expect(() => encodeSegmentsByTerm(chunk([0, 1], [1, 2]))).toThrow(/1 terms and 2 frequencies/);
    expect(() => encodeSegmentsByTerm(chunk([0, 1, 0], [1]))).toThrow(/1.5 terms and 1 frequencies/);
    expect(wholeNumbers('{-9007199254740991,0,7}')).toEqual([-9007199254740991, 0, 7]);
    expect(() => wholeNumbers('{9007199254740993}')).toThrow(/whole number/);
    expect(() => wholeNumbers('{1}}')).toThrow(/whole number/);
    expect(() => wholeNumbers('1')).toThrow(/Not an array/);
  });

  it('keeps every posting of a batch with more terms and postings than its tables start with', () => {
    // 6,000 distinct terms over 50 chunks of 300: the term table and the posting arrays grow.
    const chunks = Array.from({ length: 50 }, (_, index) => {
      const terms = Array.from({ length: 300 }, (_, n) => String(-3_000_000_000_000_000_000n + BigInt(((index * 7 + n * 13) % 6_000) * 1_000_003)));
      return { seq: 10 + index, length: 300, hashes: Int32Array.from(terms.flatMap(hashPair)), frequencies: Int32Array.from(terms, (_, n) => 1 + (n % 4)) };
    });
    const encoded = encodeSegmentsByTerm(chunks);
    const grouped = decodedByTerm(encoded);
    expect(grouped.size).toBe(encoded.count);
    expect(encoded.count).toBeGreaterThan(4_000);
    expect([...grouped.values()].reduce((sum, list) => sum + list.length, 0)).toBe(50 * 300);
    for (const list of grouped.values()) expect(list.map(([seq]) => seq)).toEqual(list.map(([seq]) => seq).sort((a, b) => a - b));
  });
});
