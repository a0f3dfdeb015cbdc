import { stat } from 'node:fs/promises';
import path from 'node:path';
import { describeGatewayScenarios, SCENARIO_REQUEST_TIMEOUT_SECONDS } from '../support/gateway-scenarios';
import { SCENARIO_WEBHOOK_ENV } from '../support/scenarios/webhooks';
import { startStandaloneProcess } from '../support/standalone-process';
import { testSigningKeyEnv } from '../support/test-signing-key';

describeGatewayScenarios('all-in-one process (embedded PostgreSQL, in-process bus)', async () => {
  const standalone = await startStandaloneProcess('standalone', {
    IDP_KEY_PUBLISH_DELAY_SECONDS: '2',
    // A new key's first tokens find it within a second (the 30 s default would hold the rotation scenario that long).
    GATEWAY_JWKS_COOLDOWN_SECONDS: '1',
    GATEWAY_REQUEST_TIMEOUT_SECONDS: String(SCENARIO_REQUEST_TIMEOUT_SECONDS),
    ...SCENARIO_WEBHOOK_ENV,
    ...testSigningKeyEnv(),
  });
  expect((await stat(path.join(standalone.dataDir, 'admin-client.json'))).mode & 0o777).toBe(0o600);
  // Never the operator's secret: standard output is a log (the file holds it).
  expect(standalone.process.output()).not.toContain(standalone.admin.clientSecret);

  return {
    gatewayUrl: standalone.gatewayUrl,
    opsUrl: standalone.opsUrl,
    readinessParts: ['bus', 'identityProvider', 'rateLimits', 'missionService', 'brainService', 'hitService', 'notificationService'],
    requestTimeoutSeconds: SCENARIO_REQUEST_TIMEOUT_SECONDS,
    issuer: standalone.issuer,
    admin: standalone.admin,
    teardown: async () => {
      expect(await standalone.stop()).toBe(0);
    },
  };
});
