import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createTestDatabase, freePort } from '@mission/persistence';
import { describeGatewayScenarios } from '../support/gateway-scenarios';
import { RunningProcess, startProcess, waitUntilReady } from '../support/processes';

/**
 * The microservice split for real: gateway, idp, mission-, brain- and hit-service each in its own
 * process, talking only over Kafka, on a fresh PostgreSQL database.
 */
describeGatewayScenarios('separate processes on Kafka and PostgreSQL', async () => {
  const brokers = process.env.KAFKA_BROKERS;
  if (!brokers) throw new Error('KAFKA_BROKERS is not set: the integration global setup should have started Kafka');
  const database = await createTestDatabase(process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres');
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'mission-it-'));
  const [gatewayPort, idpPort, missionHealth, brainHealth, hitHealth] = await Promise.all([freePort(), freePort(), freePort(), freePort(), freePort()]);
  const gatewayUrl = `http://127.0.0.1:${gatewayPort}`;
  const issuer = `http://127.0.0.1:${idpPort}`;
  const admin = { clientId: 'operator', clientSecret: randomBytes(24).toString('base64url') };
  const common = { KAFKA_BROKERS: brokers, HOST: '127.0.0.1' };

  const processes: RunningProcess[] = [
    startProcess('idp', 'apps/idp/src/main.ts', {
      ...common,
      PORT: String(idpPort),
      IDP_ISSUER: issuer,
      GATEWAY_AUDIENCE: gatewayUrl,
      DATABASE_URL: database.url,
      DATA_DIR: dataDir,
      ADMIN_CLIENT_ID: admin.clientId,
      ADMIN_CLIENT_SECRET: admin.clientSecret,
    }),
    startProcess('mission-service', 'apps/mission-service/src/main.ts', { ...common, HEALTH_PORT: String(missionHealth), DATABASE_URL: database.url }),
    startProcess('brain-service', 'apps/brain-service/src/main.ts', { ...common, HEALTH_PORT: String(brainHealth) }),
    startProcess('hit-service', 'apps/hit-service/src/main.ts', { ...common, HEALTH_PORT: String(hitHealth), DATABASE_URL: database.url }),
    startProcess('gateway', 'apps/gateway/src/main.ts', { ...common, PORT: String(gatewayPort), PUBLIC_URL: gatewayUrl, IDP_ISSUER: issuer }),
  ];
  try {
    await Promise.all([
      waitUntilReady(`${issuer}/health/ready`, processes, 120_000),
      waitUntilReady(`http://127.0.0.1:${missionHealth}/health/ready`, processes, 120_000),
      waitUntilReady(`http://127.0.0.1:${brainHealth}/health/ready`, processes, 120_000),
      waitUntilReady(`http://127.0.0.1:${hitHealth}/health/ready`, processes, 120_000),
      waitUntilReady(`${gatewayUrl}/health/ready`, processes, 120_000),
    ]);
  } catch (error) {
    await Promise.all(processes.map((running) => running.stop('SIGKILL')));
    await database.drop();
    throw error;
  }

  return {
    gatewayUrl,
    issuer,
    admin,
    teardown: async () => {
      const codes = await Promise.all(processes.map(async (running) => [running.name, await running.stop()] as const));
      await database.drop();
      await rm(dataDir, { recursive: true, force: true });
      expect(codes.filter(([, code]) => code !== 0)).toEqual([]);
    },
  };
});
