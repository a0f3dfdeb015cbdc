import { promises as fs } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { ConfigError } from '@mission/config';
import { KeyEncryptionKey, LocalKeyProvider, readOrCreateSecretFile, TransitCipher } from '@mission/crypto';
import { PayloadCodec, sealedJsonCodec } from '@mission/messaging';

const KEY_BYTES = 32;
const isKey = (text: string): boolean => /^[A-Za-z0-9_-]+$/.test(text) && Buffer.from(text, 'base64url').length === KEY_BYTES;

/** Base64url of exactly 32 random bytes (`node -p "crypto.randomBytes(32).toString('base64url')"`). */
export const PayloadKekSchema = z.string().trim().refine(isKey, 'must be base64url of 32 bytes');

/**
 * The payload key-encryption key, from configuration: `KEK` (the key itself) or `KEK_FILE` (a file
 * holding it, e.g. a mounted Secret), and `KEK_PREVIOUS`, keys still accepted for reading while a
 * rotation is under way. Every process on one Kafka cluster needs the same keys.
 */
export const PayloadKeySettings = {
  KEK: PayloadKekSchema.optional(),
  KEK_FILE: z.string().min(1).optional(),
  KEK_PREVIOUS: z
    .string()
    .transform((value) =>
      value
        .split(',')
        .map((part) => part.trim())
        .filter(Boolean),
    )
    .refine((keys) => keys.every(isKey), 'must be a comma-separated list of base64url keys of 32 bytes')
    .default([]),
};

export interface PayloadKeyConfig {
  readonly KEK?: string;
  readonly KEK_FILE?: string;
  readonly KEK_PREVIOUS: readonly string[];
}

const GENERATED_KEK_FILE = 'payload-kek.json';
const GeneratedKekFileSchema = z.object({ kek: PayloadKekSchema });

export interface PayloadKeys {
  readonly provider: LocalKeyProvider;
  /** Set when the key was generated now (embedded mode, first start): where it was written. */
  readonly generatedFile?: string;
}

/**
 * The KEK provider of a process. A separate process (gateway, idp, services) must be given its
 * KEK; the all-in-one process, when given none, generates one once into `<dataDir>/payload-kek.json`
 * (mode 0600) and keeps using it.
 */
export async function resolvePayloadKeys(config: PayloadKeyConfig, options: { readonly generateIn?: string } = {}): Promise<PayloadKeys> {
  if (config.KEK && config.KEK_FILE) throw new ConfigError(['KEK, KEK_FILE: set one of them, not both']);
  const previous = config.KEK_PREVIOUS.map((key) => KeyEncryptionKey.fromBase64Url(key));
  if (config.KEK) return { provider: new LocalKeyProvider(KeyEncryptionKey.fromBase64Url(config.KEK), previous) };
  if (config.KEK_FILE) {
    const text = await fs.readFile(config.KEK_FILE, 'utf8').catch((error: NodeJS.ErrnoException) => {
      throw new ConfigError([`KEK_FILE: cannot be read (${error.code ?? error.message})`]);
    });
    const parsed = PayloadKekSchema.safeParse(text);
    if (!parsed.success) throw new ConfigError(['KEK_FILE: must hold base64url of 32 bytes']);
    return { provider: new LocalKeyProvider(KeyEncryptionKey.fromBase64Url(parsed.data), previous) };
  }
  if (!options.generateIn) throw new ConfigError(['KEK: required (or KEK_FILE): the key that encrypts tenant payloads on the bus and at rest']);
  const file = path.join(options.generateIn, GENERATED_KEK_FILE);
  const stored = await readOrCreateSecretFile(
    file,
    (raw) => GeneratedKekFileSchema.parse(raw),
    () => ({ kek: KeyEncryptionKey.generate().toBase64Url() }),
  );
  return { provider: new LocalKeyProvider(KeyEncryptionKey.fromBase64Url(stored.value.kek), previous), generatedFile: stored.created ? file : undefined };
}

/** The Kafka payload codec of a process: JSON sealed under each tenant's data key, wrapped by the KEK. */
export function sealedPayloads(keys: PayloadKeys): PayloadCodec {
  return sealedJsonCodec(new TransitCipher(keys.provider));
}
