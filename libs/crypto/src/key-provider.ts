import { createHash } from 'node:crypto';
import { decrypt, encrypt, KeyEncryptionKey } from './key-envelope';

/** A data key as it may be stored or sent: encrypted under a key-encryption key, named by that key's id. */
export interface WrappedKey {
  readonly kekId: string;
  /** The data key encrypted under the KEK (opaque to everyone but the provider). */
  readonly wrapped: string;
}

/**
 * Where key-encryption keys live. Data keys never leave a process unwrapped; the provider wraps
 * and unwraps them, binding each to a context (the tenant, say) so a wrapped key copied to
 * another context fails. The local provider keeps the KEKs in memory from configuration; a cloud
 * KMS (its encrypt/decrypt calls with an encryption context) fits the same port.
 */
export interface KeyProvider {
  /** The id of the KEK that wraps new data keys. */
  readonly currentKekId: string;
  wrap(dataKey: Buffer, context: string): Promise<WrappedKey>;
  /** Throws when the KEK is unknown, or the wrapped key was altered or belongs to another context. */
  unwrap(key: WrappedKey, context: string): Promise<Buffer>;
}

/** The id of a KEK: a fingerprint (SHA-256, 16 hex digits) that names it without revealing it. */
export function kekIdOf(kek: KeyEncryptionKey): string {
  return createHash('sha256').update('mission-service kek id\0').update(kek.bytes()).digest('hex').slice(0, 16);
}

/**
 * KEKs from configuration: the current one wraps, it and any previous ones unwrap. Rotating is:
 * configure the new KEK as current and the old one as previous, re-wrap the stored data keys
 * (each service's `--rewrap-data-keys`), then drop the previous one.
 */
export class LocalKeyProvider implements KeyProvider {
  readonly currentKekId: string;
  private readonly keks: ReadonlyMap<string, KeyEncryptionKey>;

  constructor(
    private readonly current: KeyEncryptionKey,
    previous: readonly KeyEncryptionKey[] = [],
  ) {
    this.currentKekId = kekIdOf(current);
    this.keks = new Map([...previous, current].map((kek) => [kekIdOf(kek), kek]));
  }

  /** The KEK ids this provider can unwrap with (for operators: which keys are still needed). */
  get kekIds(): string[] {
    return [...this.keks.keys()];
  }

  async wrap(dataKey: Buffer, context: string): Promise<WrappedKey> {
    return { kekId: this.currentKekId, wrapped: encrypt(this.current, dataKey, wrapContext(this.currentKekId, context)) };
  }

  async unwrap(key: WrappedKey, context: string): Promise<Buffer> {
    const kek = this.keks.get(key.kekId);
    if (!kek) throw new Error(`Unknown key-encryption key ${key.kekId}: configure it (as a previous KEK) to read data wrapped under it`);
    return decrypt(kek, key.wrapped, wrapContext(key.kekId, context));
  }
}

const wrapContext = (kekId: string, context: string): string => `data-key|${kekId}|${context}`;
