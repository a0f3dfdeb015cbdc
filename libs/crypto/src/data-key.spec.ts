import { DecryptionError, generateDataKey, openWithDataKey, sealWithDataKey } from './data-key';

describe('sealWithDataKey', () => {
  it('takes a fresh IV for every seal, across refills of its pool, and every seal opens', () => {
    const key = generateDataKey();
    const plaintext = Buffer.from('the same text each time');
    const sealed = Array.from({ length: 3_000 }, () => sealWithDataKey(key, plaintext, 'ad'));
    expect(new Set(sealed.map((value) => value.subarray(0, 12).toString('hex'))).size).toBe(3_000);
    expect(sealed.every((value) => value.length === 12 + plaintext.length + 16)).toBe(true);
    expect(sealed.every((value) => openWithDataKey(key, value, 'ad').equals(plaintext))).toBe(true);
  });

  it('opens with a copy of the key, and with no other key, whichever key was used first', () => {
    const [first, second] = [generateDataKey(), generateDataKey()];
    const plaintext = Buffer.from('sealed under one key');
    const underFirst = sealWithDataKey(first, plaintext, 'ad');
    const underSecond = sealWithDataKey(second, plaintext, 'ad');
    expect(openWithDataKey(Buffer.from(first), underFirst, 'ad').equals(plaintext)).toBe(true);
    expect(openWithDataKey(second, underSecond, 'ad').equals(plaintext)).toBe(true);
    expect(() => openWithDataKey(second, underFirst, 'ad')).toThrow(DecryptionError);
    expect(() => openWithDataKey(Buffer.from(second), underFirst, 'ad')).toThrow(DecryptionError);
  });

  it('seals the empty text and a large one; another associated data does not open them', () => {
    const key = generateDataKey();
    for (const plaintext of [Buffer.alloc(0), Buffer.alloc(100_000, 7)]) {
      const sealed = sealWithDataKey(key, plaintext, 'row-1');
      expect(openWithDataKey(key, sealed, 'row-1').equals(plaintext)).toBe(true);
      expect(() => openWithDataKey(key, sealed, 'row-2')).toThrow(DecryptionError);
    }
  });
});
