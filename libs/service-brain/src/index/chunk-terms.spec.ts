import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { termCounts } from '../text/analyzer';
import { TermHasher } from './blind-index';
import { chunkTerms } from './chunk-terms';
import { hashTexts } from './term-hashes';

/** What chunkTerms gives, as decimal hashes with their frequencies. */
function byHash(list: ReturnType<typeof chunkTerms>): Map<string, number> {
  return new Map(hashTexts(list.hashes).map((hash, index) => [hash, list.frequencies[index] as number]));
}

/** The reference: termCounts' terms, hashed one by one, frequencies of a shared hash summed, in first-seen order. */
function expected(hasher: TermHasher, texts: string[]): { terms: Map<string, number>; length: number } {
  const terms = new Map<string, number>();
  let length = 0;
  for (const [term, tf] of termCounts(...texts)) {
    const hash = hasher.hash(term);
    terms.set(hash, (terms.get(hash) ?? 0) + tf);
    length += tf;
  }
  return { terms, length };
}

describe('chunkTerms', () => {
  const words = ['klystron', 'magnetron', 'waveguide', 'the', 'Tube', 'tubes', 'ferrite', 'circulator', '電子', 'naïve', "o'clock", '42'];
  const text = fc.array(fc.constantFrom(...words), { maxLength: 40 }).map((list) => list.join(' '));

  it('gives each distinct hash once, in first-seen order, with the frequencies of its terms summed, and the length in terms', () => {
    const hasher = new TermHasher(randomBytes(32));
    fc.assert(
      fc.property(text, text, (body, title) => {
        const list = chunkTerms(hasher, [body, title]);
        const reference = expected(hasher, [body, title]);
        expect([...byHash(list)]).toEqual([...reference.terms]);
        expect(list.length).toBe(reference.length);
        expect(list.hashes.length).toBe(2 * list.frequencies.length);
      }),
      { numRuns: 300 },
    );
  });

  it('sums the frequencies of terms whose hashes collide into one entry', () => {
    class Colliding extends TermHasher {
      protected override halves(term: string): readonly [number, number] {
        return term === 'klystron' || term === 'magnetron' ? [123, -456] : super.halves(term);
      }
    }
    const hasher = new Colliding(randomBytes(32));
    const list = chunkTerms(hasher, ['klystron magnetron klystron waveguide', 'magnetron']);
    expect([...list.hashes.subarray(0, 2)]).toEqual([123, -456]);
    expect([...list.frequencies]).toEqual([4, 1]);
    expect(list.length).toBe(5);
    // The next chunk starts afresh.
    expect([...chunkTerms(hasher, ['waveguide klystron', '']).frequencies]).toEqual([1, 1]);
  });

  it('gives each chunk arrays of its own, not views of a shared buffer', () => {
    const hasher = new TermHasher(randomBytes(32));
    const one = chunkTerms(hasher, ['klystron magnetron', '']);
    const two = chunkTerms(hasher, ['waveguide ferrite circulator', '']);
    expect(one.hashes.buffer.byteLength).toBe(4 * 4);
    expect(one.frequencies.buffer.byteLength).toBe(2 * 4);
    expect(byHash(one)).toEqual(
      new Map([
        [hasher.hash('klystron'), 1],
        [hasher.hash('magnetron'), 1],
      ]),
    );
    expect(two.frequencies.length).toBe(3);
  });

  it('keeps every term of a chunk with more distinct terms than its scratch space starts with', () => {
    const hasher = new TermHasher(randomBytes(32));
    const many = Array.from({ length: 3_000 }, (_, n) => `term${n}x`).join(' ');
    const list = chunkTerms(hasher, [many, 'term1x']);
    expect(list.frequencies.length).toBe(3_000);
    expect(list.frequencies[1]).toBe(2);
    expect(byHash(list).get(hasher.hash('term2999x'))).toBe(1);
  });
});
