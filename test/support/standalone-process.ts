import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { freePort } from '@mission/persistence';
import { clientCredentialsToken } from './api-client';
import { RunningProcess, startProcess, waitUntilReady } from './processes';

/** `npm start`'s all-in-one process on embedded defaults, on free ports, with a data directory of its own. */
export interface StandaloneProcess {
  readonly gatewayUrl: string;
  readonly issuer: string;
  /** The operations port: /metrics and the readiness details. */
  readonly opsUrl: string;
  readonly dataDir: string;
  /** The operator client the first start created (its secret is in the data directory's admin-client.json). */
  readonly admin: { readonly clientId: string; readonly clientSecret: string };
  readonly process: RunningProcess;
  /** A token of the operator client the first start created. */
  readonly operatorToken: string;
  /** SIGTERM; resolves with the exit code, and removes the data directory. */
  stop(): Promise<number | null>;
}

/** Variables of the test run's own environment that would wire the process to something else. */
const WIRING = [
  'DATABASE_URL',
  'KAFKA_BROKERS',
  'REDIS_URL',
  'ADMIN_CLIENT_ID',
  'ADMIN_CLIENT_SECRET',
  'PUBLIC_URL',
  'IDP_ISSUER',
  'IDP_KEY_ENCRYPTION_KEY',
  'KEK',
  'KEK_FILE',
  'KEK_PREVIOUS',
];

export async function startStandaloneProcess(name: string, extraEnv: Readonly<Record<string, string>> = {}): Promise<StandaloneProcess> {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), `mission-${name}-`));
  const [port, idpPort, opsPort] = [await freePort(), await freePort(), await freePort()];
  const gatewayUrl = `http://127.0.0.1:${port}`;
  const issuer = `http://127.0.0.1:${idpPort}`;
  const env: Record<string, string> = {
    ...Object.fromEntries(WIRING.map((variable) => [variable, ''])),
    PORT: String(port),
    IDP_PORT: String(idpPort),
    OPS_PORT: String(opsPort),
    DATA_DIR: dataDir,
    ...extraEnv,
  };
  const standalone = startProcess(name, 'apps/standalone/src/main.ts', env);
  try {
    await waitUntilReady(`${gatewayUrl}/health/ready`, [standalone]);
    const admin = JSON.parse(await readFile(path.join(dataDir, 'admin-client.json'), 'utf8')) as { clientId: string; clientSecret: string };
    const operatorToken = (await clientCredentialsToken(issuer, admin.clientId, admin.clientSecret)).access_token;
    return {
      gatewayUrl,
      issuer,
      opsUrl: `http://127.0.0.1:${opsPort}`,
      dataDir,
      admin,
      process: standalone,
      operatorToken,
      stop: async () => {
        const code = await standalone.stop();
        await rm(dataDir, { recursive: true, force: true });
        return code;
      },
    };
  } catch (error) {
    await standalone.stop('SIGKILL');
    await rm(dataDir, { recursive: true, force: true });
    throw error;
  }
}
