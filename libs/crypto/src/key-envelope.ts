import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

const ALGORITHM = 'aes-256-gcm';
const KEY_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const VERSION = 'v1';

/** A 32-byte AES-256-GCM key that encrypts other keys (e.g. private signing keys) at rest. */
export class KeyEncryptionKey {
  private constructor(private readonly key: Buffer) {}

  /** From base64url text of exactly 32 bytes (the form of IDP_KEY_ENCRYPTION_KEY). */
  static fromBase64Url(text: string): KeyEncryptionKey {
    if (!/^[A-Za-z0-9_-]+$/.test(text)) throw new Error('The key-encryption key must be base64url');
    const key = Buffer.from(text, 'base64url');
    if (key.length !== KEY_BYTES) throw new Error(`The key-encryption key must be ${KEY_BYTES} bytes, got ${key.length}`);
    return new KeyEncryptionKey(key);
  }

  static generate(): KeyEncryptionKey {
    return new KeyEncryptionKey(randomBytes(KEY_BYTES));
  }

  toBase64Url(): string {
    return this.key.toString('base64url');
  }

  /** Only for encrypt/decrypt in this module. */
  bytes(): Buffer {
    return this.key;
  }
}

/**
 * `v1.<iv>.<ciphertext>.<tag>` (base64url parts): AES-256-GCM with a fresh random 12-byte IV and
 * `associatedData` bound into the tag, so a ciphertext moved to another row (another kid) fails.
 */
export function encrypt(kek: KeyEncryptionKey, plaintext: string | Buffer, associatedData: string): string {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv(ALGORITHM, kek.bytes(), iv, { authTagLength: TAG_BYTES });
  cipher.setAAD(Buffer.from(associatedData, 'utf8'));
  const ciphertext = Buffer.concat([cipher.update(typeof plaintext === 'string' ? Buffer.from(plaintext, 'utf8') : plaintext), cipher.final()]);
  const tag = cipher.getAuthTag();
  return [VERSION, iv.toString('base64url'), ciphertext.toString('base64url'), tag.toString('base64url')].join('.');
}

/** Throws on a wrong key, wrong associated data or any modification of the envelope. */
export function decrypt(kek: KeyEncryptionKey, envelope: string, associatedData: string): Buffer {
  const parts = envelope.split('.');
  if (parts.length !== 4 || parts[0] !== VERSION) throw new Error('Not a key envelope');
  const [, ivText, ciphertextText, tagText] = parts as [string, string, string, string];
  const iv = Buffer.from(ivText, 'base64url');
  const tag = Buffer.from(tagText, 'base64url');
  if (iv.length !== IV_BYTES || tag.length !== TAG_BYTES) throw new Error('Not a key envelope');
  const decipher = createDecipheriv(ALGORITHM, kek.bytes(), iv, { authTagLength: TAG_BYTES });
  decipher.setAAD(Buffer.from(associatedData, 'utf8'));
  decipher.setAuthTag(tag);
  try {
    return Buffer.concat([decipher.update(Buffer.from(ciphertextText, 'base64url')), decipher.final()]);
  } catch {
    throw new Error('Key envelope failed authentication (wrong key, wrong context or tampered)');
  }
}
