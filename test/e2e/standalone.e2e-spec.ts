import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { freePort } from '@mission/persistence';
import { describeGatewayScenarios, SCENARIO_REQUEST_TIMEOUT_SECONDS } from '../support/gateway-scenarios';
import { startProcess, waitUntilReady } from '../support/processes';
import { testSigningKeyEnv } from '../support/test-signing-key';

describeGatewayScenarios('all-in-one process (embedded PostgreSQL, in-process bus)', async () => {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'mission-e2e-'));
  const [port, idpPort, opsPort] = [await freePort(), await freePort(), await freePort()];
  const env: Record<string, string> = {
    PORT: String(port),
    IDP_PORT: String(idpPort),
    OPS_PORT: String(opsPort),
    DATA_DIR: dataDir,
    IDP_KEY_PUBLISH_DELAY_SECONDS: '2',
    GATEWAY_REQUEST_TIMEOUT_SECONDS: String(SCENARIO_REQUEST_TIMEOUT_SECONDS),
    ...testSigningKeyEnv(),
  };
  for (const name of [
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
  ])
    env[name] = '';
  const standalone = startProcess('standalone', 'apps/standalone/src/main.ts', env);
  const gatewayUrl = `http://127.0.0.1:${port}`;
  await waitUntilReady(`${gatewayUrl}/health/ready`, [standalone]);

  const credentialsFile = path.join(dataDir, 'admin-client.json');
  expect((await stat(credentialsFile)).mode & 0o777).toBe(0o600);
  const admin = JSON.parse(await readFile(credentialsFile, 'utf8')) as { clientId: string; clientSecret: string };
  // Never the operator's secret: standard output is a log (the file holds it).
  expect(standalone.output()).not.toContain(admin.clientSecret);

  return {
    gatewayUrl,
    opsUrl: `http://127.0.0.1:${opsPort}`,
    readinessParts: ['bus', 'identityProvider', 'rateLimits', 'missionService', 'brainService', 'hitService'],
    requestTimeoutSeconds: SCENARIO_REQUEST_TIMEOUT_SECONDS,
    issuer: `http://127.0.0.1:${idpPort}`,
    admin,
    teardown: async () => {
      const code = await standalone.stop();
      expect(code).toBe(0);
      await rm(dataDir, { recursive: true, force: true });
    },
  };
});
