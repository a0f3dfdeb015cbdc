import { decrypt, encrypt, KeyEncryptionKey } from './key-envelope';

describe('key envelope (AES-256-GCM)', () => {
  const kek = KeyEncryptionKey.generate();
  const secret = JSON.stringify({ kty: 'EC', d: 'private-part' });

  it('round-trips and never contains the plaintext', () => {
    const envelope = encrypt(kek, secret, 'kid-1');
    expect(envelope).not.toContain('private-part');
    expect(decrypt(kek, envelope, 'kid-1').toString('utf8')).toBe(secret);
  });

  it('uses a fresh IV each time', () => {
    expect(encrypt(kek, secret, 'kid-1')).not.toBe(encrypt(kek, secret, 'kid-1'));
  });

  it('detects tampering with the ciphertext, IV or tag', () => {
    const [version, iv, ciphertext, tag] = encrypt(kek, secret, 'kid-1').split('.') as [string, string, string, string];
    const flip = (text: string): string => {
      const bytes = Buffer.from(text, 'base64url');
      bytes[0] = (bytes[0] ?? 0) ^ 1;
      return bytes.toString('base64url');
    };
    for (const tampered of [
      [version, iv, flip(ciphertext), tag],
      [version, flip(iv), ciphertext, tag],
      [version, iv, ciphertext, flip(tag)],
    ]) {
      expect(() => decrypt(kek, tampered.join('.'), 'kid-1')).toThrow(/failed authentication/);
    }
    expect(() => decrypt(kek, 'garbage', 'kid-1')).toThrow(/Not a key envelope/);
  });

  it('fails with the wrong key or the wrong associated data (kid)', () => {
    const envelope = encrypt(kek, secret, 'kid-1');
    expect(() => decrypt(KeyEncryptionKey.generate(), envelope, 'kid-1')).toThrow(/failed authentication/);
    expect(() => decrypt(kek, envelope, 'kid-2')).toThrow(/failed authentication/);
  });

  it('accepts only base64url of exactly 32 bytes', () => {
    const text = kek.toBase64Url();
    expect(KeyEncryptionKey.fromBase64Url(text).toBase64Url()).toBe(text);
    expect(() => KeyEncryptionKey.fromBase64Url(Buffer.alloc(16).toString('base64url'))).toThrow(/32 bytes/);
    expect(() => KeyEncryptionKey.fromBase64Url('not base64url!')).toThrow(/base64url/);
  });
});
