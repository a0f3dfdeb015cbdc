import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import { DerivedTenantIndexKeys, TermHasher } from './blind-index';
import { hashText } from './term-hashes';

/** Collisions forced: every term starting with "x" hashes alike. */
class Colliding extends TermHasher {
  protected override halves(term: string): readonly [number, number] {
    return term.startsWith('x') ? [-5, 7] : super.halves(term);
  }
}

describe('blind index', () => {
  const secret = randomBytes(32);
  const keys = new DerivedTenantIndexKeys(secret);

  it('derives a stable, distinct 256-bit key per tenant', async () => {
    const [a, b] = [randomUUID(), randomUUID()];
    const keyA = await keys.keyFor(a);
    expect(keyA).toHaveLength(32);
    expect(await new DerivedTenantIndexKeys(Buffer.from(secret)).keyFor(a)).toEqual(keyA);
    expect(await keys.keyFor(b)).not.toEqual(keyA);
    expect(await new DerivedTenantIndexKeys(randomBytes(32)).keyFor(a)).not.toEqual(keyA);
  });

  it('hashes by term number as by term, and starts again with a new numbering', async () => {
    const hasher = new TermHasher(await keys.keyFor(randomUUID()));
    const reference = new TermHasher(await keys.keyFor(randomUUID()));
    const numbered = (on: TermHasher, term: string, number: number, generation: number): string => {
      const slot = on.numberedSlot(term, number, generation);
      return hashText(on.high(slot), on.low(slot));
    };
    expect(numbered(hasher, 'klystron', 40_000, 1)).toBe(hasher.hash('klystron'));
    expect(numbered(hasher, 'magnetron', 3, 1)).toBe(hasher.hash('magnetron'));
    expect(hasher.numberedSlot('klystron', 40_000, 1)).toBe(40_000);
    expect(numbered(hasher, 'klystron', 40_000, 1)).toBe(hasher.hash('klystron'));
    // Generation 2 numbers its terms anew: number 3 is another term now.
    expect(numbered(hasher, 'waveguide', 3, 2)).toBe(hasher.hash('waveguide'));
    expect(numbered(hasher, 'waveguide', 3, 2)).not.toBe(hasher.hash('magnetron'));
    expect(numbered(reference, 'waveguide', 3, 2)).not.toBe(numbered(hasher, 'waveguide', 3, 2));
  });

  it('gives terms whose hashes collide one slot, within a numbering only', async () => {
    const hasher = new Colliding(await keys.keyFor(randomUUID()));
    expect(hasher.numberedSlot('xenon', 10, 1)).toBe(10);
    expect(hasher.numberedSlot('xylem', 12, 1)).toBe(10);
    expect(hasher.numberedSlot('argon', 11, 1)).toBe(11);
    expect([hasher.high(10), hasher.low(10)]).toEqual([-5, 7]);
    expect(hasher.hash('xylem')).toBe(hashText(-5, 7));
    // A new numbering: number 12 comes first now, and slot 10 is no one's until given.
    expect(hasher.numberedSlot('xylem', 12, 2)).toBe(12);
    expect(hasher.numberedSlot('xenon', 10, 2)).toBe(12);
    expect(hasher.numberedSlot('argon', 3, 2)).toBe(3);
  });

  it('keeps every hash of thousands of numbered terms, collisions found past the growth of its table', async () => {
    const hasher = new Colliding(await keys.keyFor(randomUUID()));
    // Met before the table grows: found after it.
    expect(hasher.numberedSlot('xenon', 10_000, 1)).toBe(10_000);
    for (let number = 0; number < 5_000; number++) {
      const slot = hasher.numberedSlot(`term${number}`, number, 1);
      expect(slot).toBe(number);
      expect(hashText(hasher.high(slot), hasher.low(slot))).toBe(hasher.hash(`term${number}`));
    }
    expect(hasher.numberedSlot('xylem', 7_000, 1)).toBe(10_000);
    for (let number = 0; number < 5_000; number += 499) expect(hasher.numberedSlot(`term${number}`, number, 1)).toBe(number);
  });

  it('refuses a short secret', () => {
    expect(() => new DerivedTenantIndexKeys(randomBytes(16))).toThrow(/at least 32 bytes/);
  });

  it('hashes a term to a signed 64-bit decimal that never contains the term and differs per tenant', async () => {
    const hasherA = new TermHasher(await keys.keyFor(randomUUID()));
    const hasherB = new TermHasher(await keys.keyFor(randomUUID()));
    const hash = hasherA.hash('transistor');
    expect(hash).toMatch(/^-?\d{1,19}$/);
    expect(BigInt(hash)).toBeGreaterThanOrEqual(-(2n ** 63n));
    expect(BigInt(hash)).toBeLessThan(2n ** 63n);
    expect(hasherA.hash('transistor')).toBe(hash);
    expect(hasherB.hash('transistor')).not.toBe(hash);
    expect(hasherA.hash('transistors')).not.toBe(hash);
  });

  it('is HMAC-SHA256 of the term under the tenant key, its first 64 bits as a signed decimal', () => {
    // A known answer: the key bytes 0..31 and the term, hashed here from the raw key.
    const key = Buffer.from(Array.from({ length: 32 }, (_, index) => index));
    const expected = (term: string) => createHmac('sha256', key).update(term, 'utf8').digest().readBigInt64BE(0).toString();
    const hasher = new TermHasher(Buffer.from(key));
    for (const term of ['transistor', 'straße', '電子', '']) expect(hasher.hash(term)).toBe(expected(term));
    expect(hasher.hash('transistor')).toBe('7831738820200143402');
  });

  it('keeps distinct terms distinct (no collision among 100,000 terms)', async () => {
    const hasher = new TermHasher(await keys.keyFor(randomUUID()));
    const hashes = new Set(Array.from({ length: 100_000 }, (_, n) => hasher.hash(`term${n}`)));
    expect(hashes.size).toBe(100_000);
  });

  it('has a key check that depends on the key only', async () => {
    const tenant = randomUUID();
    expect(new TermHasher(await keys.keyFor(tenant)).keyCheck()).toBe(new TermHasher(await keys.keyFor(tenant)).keyCheck());
    expect(new TermHasher(await keys.keyFor(tenant)).keyCheck()).not.toBe(new TermHasher(await new DerivedTenantIndexKeys(randomBytes(32)).keyFor(tenant)).keyCheck());
  });
});
