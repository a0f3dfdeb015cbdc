import { DecryptionError, generateDataKey, openWithDataKey, sealWithDataKey } from './data-key';
import type { KeyProvider } from './key-provider';

export interface TransitCipherOptions {
  /** How long one data key encrypts a scope's messages before a new one is made (default 5 min). */
  readonly keyLifetimeMs?: number;
  /** Messages one data key encrypts at most (default 1,000,000: far below GCM's 2³² random-IV bound). */
  readonly maxMessagesPerKey?: number;
  /** Unwrapped data keys remembered by a receiver (default 10,000). */
  readonly cacheSize?: number;
  readonly now?: () => number;
}

/** A message body sealed for the wire, and the wrapped data key that opens it (sent beside it). */
export interface SealedMessage {
  readonly body: Buffer;
  readonly key: string;
}

interface SendingKey {
  readonly dataKey: Buffer;
  readonly header: string;
  readonly expiresAt: number;
  used: number;
}

/**
 * Envelope encryption of messages in transit. Each scope (a tenant, or the platform for operator
 * traffic) has its own data key, wrapped by the KEK with the scope as context and sent with every
 * message, so any process holding the KEK can open it and nothing else can: a broker sees only
 * ciphertext. Keys are reused for a while (caching, as envelope-encryption SDKs do) so the KEK,
 * possibly a remote KMS, is asked once per key, not once per message.
 */
export class TransitCipher {
  private readonly sending = new Map<string, Promise<SendingKey>>();
  private readonly received = new Map<string, Promise<Buffer>>();
  private readonly keyLifetimeMs: number;
  private readonly maxMessagesPerKey: number;
  private readonly cacheSize: number;
  private readonly now: () => number;

  constructor(
    private readonly provider: KeyProvider,
    options: TransitCipherOptions = {},
  ) {
    this.keyLifetimeMs = options.keyLifetimeMs ?? 300_000;
    this.maxMessagesPerKey = options.maxMessagesPerKey ?? 1_000_000;
    this.cacheSize = options.cacheSize ?? 10_000;
    this.now = options.now ?? Date.now;
  }

  /** Encrypts `plaintext` for `scope`; `associatedData` (e.g. the message id) is bound to it as well. */
  async seal(scope: string, plaintext: Buffer, associatedData: string): Promise<SealedMessage> {
    const key = await this.sendingKey(scope);
    return { body: sealWithDataKey(key.dataKey, plaintext, aad(scope, associatedData)), key: key.header };
  }

  /** Throws DecryptionError unless `body` was sealed for this scope and associated data, with a key this KEK wrapped. */
  async open(scope: string, sealed: SealedMessage, associatedData: string): Promise<Buffer> {
    const dataKey = await this.receivedKey(scope, sealed.key);
    return openWithDataKey(dataKey, sealed.body, aad(scope, associatedData));
  }

  private async sendingKey(scope: string): Promise<SendingKey> {
    const cached = this.sending.get(scope);
    if (cached) {
      const key = await cached.catch(() => undefined);
      if (key && key.expiresAt > this.now() && key.used < this.maxMessagesPerKey) {
        key.used++;
        return key;
      }
      if (this.sending.get(scope) === cached) this.sending.delete(scope);
    }
    const made = (async (): Promise<SendingKey> => {
      const dataKey = generateDataKey();
      const wrapped = await this.provider.wrap(dataKey, transitContext(scope));
      return { dataKey, header: `${wrapped.kekId}:${wrapped.wrapped}`, expiresAt: this.now() + this.keyLifetimeMs, used: 1 };
    })();
    this.sending.set(scope, made);
    made.catch(() => this.sending.get(scope) === made && this.sending.delete(scope));
    return made;
  }

  private receivedKey(scope: string, header: string): Promise<Buffer> {
    const cacheKey = `${scope}\0${header}`;
    const cached = this.received.get(cacheKey);
    if (cached) return cached;
    const separator = header.indexOf(':');
    if (separator <= 0) return Promise.reject(new DecryptionError('Malformed message key'));
    const unwrapped = this.provider.unwrap({ kekId: header.slice(0, separator), wrapped: header.slice(separator + 1) }, transitContext(scope)).catch((error: unknown) => {
      this.received.delete(cacheKey);
      throw error instanceof DecryptionError ? error : new DecryptionError(error instanceof Error ? error.message : String(error));
    });
    if (this.received.size >= this.cacheSize) this.received.delete(this.received.keys().next().value as string);
    this.received.set(cacheKey, unwrapped);
    return unwrapped;
  }
}

const aad = (scope: string, associatedData: string): string => `message|${scope}|${associatedData}`;
/** Keys wrapped for transit are of their own kind: none can be passed off as a stored data key, or the reverse. */
const transitContext = (scope: string): string => `transit|${scope}`;
