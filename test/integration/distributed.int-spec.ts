import { describeGatewayScenarios, SCENARIO_REQUEST_TIMEOUT_SECONDS } from '../support/gateway-scenarios';
import { startDistributedStack } from '../support/distributed-stack';
import { kafkaAccessFromEnv } from '../support/kafka-access';

/**
 * The microservice split for real: gateway, idp, mission-, brain- and hit-service each in its own
 * process, talking only over Kafka, on a fresh PostgreSQL database.
 */
describeGatewayScenarios('separate processes on Kafka and PostgreSQL', async () => {
  const stack = await startDistributedStack(kafkaAccessFromEnv(), process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres', {
    GATEWAY_REQUEST_TIMEOUT_SECONDS: String(SCENARIO_REQUEST_TIMEOUT_SECONDS),
  });
  return {
    gatewayUrl: stack.gatewayUrl,
    opsUrl: stack.opsUrl('gateway'),
    // The services report on their own health ports.
    readinessParts: ['bus', 'identityProvider', 'rateLimits'],
    requestTimeoutSeconds: SCENARIO_REQUEST_TIMEOUT_SECONDS,
    issuer: stack.issuer,
    admin: stack.admin,
    teardown: async () => {
      expect(await stack.stop()).toEqual([]);
    },
  };
});
