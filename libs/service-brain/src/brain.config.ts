import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { ServiceConfigSchema } from '@mission/runtime';
import { MIN_INDEX_SECRET_BYTES } from './index/blind-index';

const BASE64 = /^[A-Za-z0-9+/_-]+={0,2}$/;

/** A secret given as base64 (or base64url) of at least 32 random bytes. */
export const IndexSecretSchema = z
  .string()
  .trim()
  .refine((value) => BASE64.test(value) && Buffer.from(value, 'base64').length >= MIN_INDEX_SECRET_BYTES, {
    message: `must be base64 of at least ${MIN_INDEX_SECRET_BYTES} random bytes (e.g. openssl rand -base64 32)`,
  })
  .transform((value) => Buffer.from(value, 'base64'));

/** Environment of brain-service: the common service settings plus the blind-index secret. */
export const BrainServiceConfigSchema = ServiceConfigSchema.extend({
  BRAIN_INDEX_KEY: IndexSecretSchema,
});
export type BrainServiceConfig = z.output<typeof BrainServiceConfigSchema>;

/** The all-in-one process's: a key of its own when none is configured (resolveIndexSecret). */
export const EmbeddedBrainConfigSchema = z.object({ BRAIN_INDEX_KEY: IndexSecretSchema.optional() });

export const INDEX_SECRET_FILE = 'brain-index.key';

/**
 * The blind-index secret of the embedded mode: the configured one, or the one generated on the
 * first start and kept in `<dataDir>/brain-index.key` (mode 0600). It must never change for a
 * given database: terms indexed under one secret are not found under another.
 */
export async function resolveIndexSecret(configured: Buffer | undefined, dataDir: string): Promise<Buffer> {
  if (configured) return configured;
  const file = path.join(dataDir, INDEX_SECRET_FILE);
  await fs.mkdir(dataDir, { recursive: true });
  try {
    await fs.writeFile(file, `${randomBytes(32).toString('base64')}\n`, { mode: 0o600, flag: 'wx' });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
  await fs.chmod(file, 0o600);
  const parsed = IndexSecretSchema.safeParse(await fs.readFile(file, 'utf8'));
  if (!parsed.success) throw new Error(`${file} does not hold a valid blind-index secret; restore it (deleting it makes the existing index unusable)`);
  return parsed.data;
}
