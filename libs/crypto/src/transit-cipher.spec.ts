import { DecryptionError } from './data-key';
import { KeyEncryptionKey } from './key-envelope';
import { KeyProvider, kekIdOf, LocalKeyProvider, WrappedKey } from './key-provider';
import { TransitCipher } from './transit-cipher';

const TENANT_A = 'c4c8bd9e-2f4b-4d42-9d5a-1f1f5c0c0a01';
const TENANT_B = 'c4c8bd9e-2f4b-4d42-9d5a-1f1f5c0c0a02';
const text = (value: string) => Buffer.from(value, 'utf8');

/** A provider that counts its calls: the KEK (maybe a remote KMS) must be asked once per data key, not per message. */
class CountingProvider implements KeyProvider {
  wraps = 0;
  unwraps = 0;
  constructor(private readonly inner: KeyProvider) {}
  get currentKekId(): string {
    return this.inner.currentKekId;
  }
  wrap(dataKey: Buffer, context: string): Promise<WrappedKey> {
    this.wraps++;
    return this.inner.wrap(dataKey, context);
  }
  unwrap(key: WrappedKey, context: string): Promise<Buffer> {
    this.unwraps++;
    return this.inner.unwrap(key, context);
  }
}

describe('LocalKeyProvider', () => {
  const kek = KeyEncryptionKey.generate();

  it('names a KEK by a fingerprint that is stable and reveals nothing of it', () => {
    expect(kekIdOf(kek)).toMatch(/^[0-9a-f]{16}$/);
    expect(kekIdOf(KeyEncryptionKey.fromBase64Url(kek.toBase64Url()))).toBe(kekIdOf(kek));
    expect(kekIdOf(KeyEncryptionKey.generate())).not.toBe(kekIdOf(kek));
    expect(kek.toBase64Url()).not.toContain(kekIdOf(kek));
  });

  it('unwraps a data key only in the context it was wrapped for', async () => {
    const provider = new LocalKeyProvider(kek);
    const dataKey = Buffer.alloc(32, 7);
    const wrapped = await provider.wrap(dataKey, TENANT_A);
    expect(wrapped.kekId).toBe(provider.currentKekId);
    expect(wrapped.wrapped).not.toContain(dataKey.toString('base64url'));
    await expect(provider.unwrap(wrapped, TENANT_A)).resolves.toEqual(dataKey);
    await expect(provider.unwrap(wrapped, TENANT_B)).rejects.toThrow('failed authentication');
  });

  it('reads keys wrapped under a previous KEK during a rotation, and names a KEK it does not have', async () => {
    const old = new LocalKeyProvider(kek);
    const wrapped = await old.wrap(Buffer.alloc(32, 1), TENANT_A);
    const rotated = new LocalKeyProvider(KeyEncryptionKey.generate(), [kek]);
    expect(rotated.currentKekId).not.toBe(old.currentKekId);
    expect(rotated.kekIds).toEqual(expect.arrayContaining([old.currentKekId, rotated.currentKekId]));
    await expect(rotated.unwrap(wrapped, TENANT_A)).resolves.toEqual(Buffer.alloc(32, 1));
    await expect(new LocalKeyProvider(KeyEncryptionKey.generate()).unwrap(wrapped, TENANT_A)).rejects.toThrow(`Unknown key-encryption key ${old.currentKekId}`);
  });
});

describe('TransitCipher', () => {
  const kek = KeyEncryptionKey.generate();

  it('seals so that only the same scope and associated data open it, and never shows the plaintext', async () => {
    const sender = new TransitCipher(new LocalKeyProvider(kek));
    const receiver = new TransitCipher(new LocalKeyProvider(kek));
    const sealed = await sender.seal(TENANT_A, text('objective: canary-42'), 'message-1');
    expect(sealed.body.toString('latin1')).not.toContain('canary-42');
    await expect(receiver.open(TENANT_A, sealed, 'message-1')).resolves.toEqual(text('objective: canary-42'));
    await expect(receiver.open(TENANT_B, sealed, 'message-1')).rejects.toBeInstanceOf(DecryptionError);
    await expect(receiver.open(TENANT_A, sealed, 'message-2')).rejects.toBeInstanceOf(DecryptionError);
  });

  it('fails on a flipped bit, a truncated body, a malformed key or another KEK: a DecryptionError, never garbage', async () => {
    const sender = new TransitCipher(new LocalKeyProvider(kek));
    const sealed = await sender.seal(TENANT_A, text('payload'), 'm');
    const flipped = Buffer.from(sealed.body);
    flipped[flipped.length - 20] ^= 1;
    const receiver = new TransitCipher(new LocalKeyProvider(kek));
    await expect(receiver.open(TENANT_A, { ...sealed, body: flipped }, 'm')).rejects.toBeInstanceOf(DecryptionError);
    await expect(receiver.open(TENANT_A, { ...sealed, body: sealed.body.subarray(0, 20) }, 'm')).rejects.toBeInstanceOf(DecryptionError);
    await expect(receiver.open(TENANT_A, { ...sealed, key: 'no-separator' }, 'm')).rejects.toBeInstanceOf(DecryptionError);
    await expect(new TransitCipher(new LocalKeyProvider(KeyEncryptionKey.generate())).open(TENANT_A, sealed, 'm')).rejects.toBeInstanceOf(DecryptionError);
    await expect(receiver.open(TENANT_A, sealed, 'm')).resolves.toEqual(text('payload'));
  });

  it('asks the KEK once per data key on each side, however many messages it seals', async () => {
    const sending = new CountingProvider(new LocalKeyProvider(kek));
    const receiving = new CountingProvider(new LocalKeyProvider(kek));
    const sender = new TransitCipher(sending);
    const receiver = new TransitCipher(receiving);
    const messages = await Promise.all(Array.from({ length: 50 }, (_, i) => sender.seal(TENANT_A, text(`m${i}`), `id-${i}`)));
    await Promise.all(messages.map((sealed, i) => receiver.open(TENANT_A, sealed, `id-${i}`)));
    expect(new Set(messages.map((sealed) => sealed.key)).size).toBe(1);
    expect({ wraps: sending.wraps, unwraps: receiving.unwraps }).toEqual({ wraps: 1, unwraps: 1 });
    await sender.seal(TENANT_B, text('other tenant'), 'id-b');
    expect(sending.wraps).toBe(2);
  });

  it('moves to a new data key after its lifetime or its message budget', async () => {
    let now = 0;
    const provider = new CountingProvider(new LocalKeyProvider(kek));
    const cipher = new TransitCipher(provider, { keyLifetimeMs: 1_000, maxMessagesPerKey: 3, now: () => now });
    const keys: string[] = [];
    for (let i = 0; i < 4; i++) keys.push((await cipher.seal(TENANT_A, text('x'), String(i))).key);
    expect(new Set(keys.slice(0, 3)).size).toBe(1);
    expect(keys[3]).not.toBe(keys[0]);
    now += 1_001;
    expect((await cipher.seal(TENANT_A, text('x'), 'later')).key).not.toBe(keys[3]);
    expect(provider.wraps).toBe(3);
  });
});
