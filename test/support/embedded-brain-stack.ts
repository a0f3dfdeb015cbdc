import { randomBytes } from 'node:crypto';
import { chmod, mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { KeyEncryptionKey, KeyProvider, LocalKeyProvider } from '@mission/crypto';
import { freePort, startEmbeddedPostgres } from '@mission/persistence';
import { call, clientCredentialsToken } from './api-client';
import { startProcess, waitUntilReady } from './processes';

export interface EmbeddedBrainStack {
  readonly gatewayUrl: string;
  /** A token of the stack's one enterprise tenant. */
  readonly token: string;
  readonly tenantId: string;
  /** The database the Brain writes to, for tools that read it directly. */
  readonly postgresUrl: string;
  /** The secret the Brain's per-tenant index keys derive from. */
  readonly indexSecret: Buffer;
  /** The payload keys the stack seals content with, for tools that read the database directly. */
  readonly keys: KeyProvider;
  /** The all-in-one process's pid, for tools that measure what it uses. */
  readonly pid: number | undefined;
  stop(): Promise<void>;
}

/**
 * The all-in-one process on an embedded PostgreSQL of its own, with one enterprise tenant at the
 * highest rate limit and its token: what the Brain's evaluation and benchmark drive through the
 * public API.
 */
export async function startEmbeddedBrainStack(options: {
  readonly label: string;
  readonly tenantName: string;
  readonly env?: Readonly<Record<string, string>>;
  readonly log: (message: string) => void;
}): Promise<EmbeddedBrainStack> {
  const workDir = await mkdtemp(path.join(os.tmpdir(), `mission-${options.label}-`));
  // PostgreSQL runs as its own user when we are root: it must be able to reach its directory.
  await chmod(workDir, 0o755);
  const postgres = await startEmbeddedPostgres(path.join(workDir, 'pg'), options.log).catch(async (error: unknown) => {
    await rm(workDir, { recursive: true, force: true });
    throw error;
  });
  const indexSecret = randomBytes(32);
  const kek = KeyEncryptionKey.generate();
  const [port, idpPort, opsPort] = [await freePort(), await freePort(), await freePort()];
  const gatewayUrl = `http://127.0.0.1:${port}`;
  const standalone = startProcess('standalone', 'apps/standalone/src/main.ts', {
    ...options.env,
    PORT: String(port),
    IDP_PORT: String(idpPort),
    OPS_PORT: String(opsPort),
    DATA_DIR: path.join(workDir, 'data'),
    DATABASE_URL: postgres.url,
    BRAIN_INDEX_KEY: indexSecret.toString('base64'),
    KEK: kek.toBase64Url(),
    KEK_FILE: '',
    KEK_PREVIOUS: '',
    KAFKA_BROKERS: '',
    REDIS_URL: '',
    ADMIN_CLIENT_ID: '',
    ADMIN_CLIENT_SECRET: '',
    PUBLIC_URL: '',
    IDP_ISSUER: '',
  });
  const stop = async (): Promise<void> => {
    await standalone.stop();
    await postgres.stop();
    await rm(workDir, { recursive: true, force: true });
  };
  try {
    await waitUntilReady(`${gatewayUrl}/health/ready`, [standalone], 120_000);
    const issuer = `http://127.0.0.1:${idpPort}`;
    const admin = JSON.parse(await readFile(path.join(workDir, 'data', 'admin-client.json'), 'utf8')) as { clientId: string; clientSecret: string };
    const adminToken = (await clientCredentialsToken(issuer, admin.clientId, admin.clientSecret)).access_token;
    const tenant = await call(gatewayUrl, 'POST', '/admin/tenants', { token: adminToken, body: { name: options.tenantName, tier: 'enterprise', rpm: 1_000_000 } });
    if (tenant.status !== 201) throw new Error(`Creating the tenant answered ${tenant.status}: ${JSON.stringify(tenant.body)}`);
    const token = (await clientCredentialsToken(issuer, tenant.body.client.clientId, tenant.body.client.clientSecret)).access_token;
    return { gatewayUrl, token, tenantId: tenant.body.id, postgresUrl: postgres.url, indexSecret, keys: new LocalKeyProvider(kek), pid: standalone.child.pid, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
