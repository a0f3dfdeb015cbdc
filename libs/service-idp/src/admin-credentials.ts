import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { z } from 'zod';
import { readOrCreateSecretFile } from '@mission/crypto';

export const ADMIN_CLIENT_FILE = 'admin-client.json';

export interface AdminCredentials {
  readonly clientId: string;
  readonly clientSecret: string;
  /** True only on the start that generated them: the one time they may be printed. */
  readonly generated: boolean;
}

export interface ResolveAdminCredentialsOptions {
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly dataDir: string;
  /** The single-process default mode, the only one allowed to invent credentials. */
  readonly embedded: boolean;
}

const AdminClientFileSchema = z.strictObject({
  clientId: z.string().min(1),
  clientSecret: z.string().min(16),
});

/**
 * The bootstrap operator client. ADMIN_CLIENT_ID / ADMIN_CLIENT_SECRET win when both are set.
 * Otherwise the embedded mode generates them once and keeps them in `<dataDir>/admin-client.json`
 * (0600), so that they survive restarts; a distributed deployment must configure them, because
 * replicas each generating their own would disagree.
 */
export async function resolveAdminCredentials(options: ResolveAdminCredentialsOptions): Promise<AdminCredentials> {
  const clientId = options.env.ADMIN_CLIENT_ID || undefined;
  const clientSecret = options.env.ADMIN_CLIENT_SECRET || undefined;
  if (clientId && clientSecret) return { clientId, clientSecret, generated: false };
  if (clientId || clientSecret) {
    throw new Error('Set both ADMIN_CLIENT_ID and ADMIN_CLIENT_SECRET, or neither');
  }
  if (!options.embedded) {
    throw new Error('ADMIN_CLIENT_ID and ADMIN_CLIENT_SECRET are required outside the embedded mode');
  }
  const file = await readOrCreateSecretFile(
    path.join(options.dataDir, ADMIN_CLIENT_FILE),
    (raw) => AdminClientFileSchema.parse(raw),
    () => ({ clientId: `cl_admin_${randomBytes(8).toString('hex')}`, clientSecret: randomBytes(32).toString('base64url') }),
  );
  return { ...file.value, generated: file.created };
}
