import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

/** AES-256-GCM with a data key: what payloads are encrypted with (the data key itself is wrapped by a KEK). */
const ALGORITHM = 'aes-256-gcm';
export const DATA_KEY_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;

export function generateDataKey(): Buffer {
  return randomBytes(DATA_KEY_BYTES);
}

/** `iv ‖ ciphertext ‖ tag`, a fresh random IV each time, `associatedData` bound into the tag. */
export function sealWithDataKey(dataKey: Buffer, plaintext: Buffer, associatedData: string): Buffer {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv(ALGORITHM, dataKey, iv, { authTagLength: TAG_BYTES });
  cipher.setAAD(Buffer.from(associatedData, 'utf8'));
  const ciphertext = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return Buffer.concat([iv, ciphertext, cipher.getAuthTag()]);
}

/** The failure of every decryption: never garbage, never a hint of which part was wrong. */
export class DecryptionError extends Error {
  constructor(message = 'Ciphertext failed authentication (wrong key, wrong tenant or record, or tampered)') {
    super(message);
    this.name = 'DecryptionError';
  }
}

export function openWithDataKey(dataKey: Buffer, sealed: Buffer, associatedData: string): Buffer {
  if (sealed.length < IV_BYTES + TAG_BYTES) throw new DecryptionError('Ciphertext too short');
  const iv = sealed.subarray(0, IV_BYTES);
  const tag = sealed.subarray(sealed.length - TAG_BYTES);
  const decipher = createDecipheriv(ALGORITHM, dataKey, iv, { authTagLength: TAG_BYTES });
  decipher.setAAD(Buffer.from(associatedData, 'utf8'));
  decipher.setAuthTag(tag);
  try {
    return Buffer.concat([decipher.update(sealed.subarray(IV_BYTES, sealed.length - TAG_BYTES)), decipher.final()]);
  } catch {
    throw new DecryptionError();
  }
}
