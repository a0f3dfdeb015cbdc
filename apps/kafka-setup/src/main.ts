import { z } from 'zod';
import { ConfigError, env, loadConfig } from '@mission/config';
import { BUS_PRINCIPALS, contextLogger, createLogger, KafkaSaslSettings, kafkaSasl, KafkaTlsSettings, kafkaTls, setUpKafka, STANDALONE_PRINCIPAL } from '@mission/runtime';

/**
 * `npm run kafka:setup`: run once per deployment (a Job in Kubernetes, a one-shot service in
 * compose), signed in as a Kafka administrator: creates the platform's topics and sets each
 * service's ACLs. The services themselves may create nothing but their own reply topics.
 */
const SetupConfigSchema = z.object({
  KAFKA_BROKERS: env.hostPorts(),
  LOG_LEVEL: env.logLevel(),
  ...KafkaTlsSettings,
  ...KafkaSaslSettings,
});

async function main(): Promise<void> {
  const config = loadConfig(SetupConfigSchema);
  const logger = createLogger('kafka-setup', config.LOG_LEVEL);
  const result = await setUpKafka({
    brokers: config.KAFKA_BROKERS,
    ssl: await kafkaTls(config),
    sasl: await kafkaSasl(config),
    logger: contextLogger(logger),
    // The all-in-one process on Kafka (`npm start` with KAFKA_BROKERS) holds every service's rights: only on request.
    principals: process.argv.includes('--with-standalone') ? [...BUS_PRINCIPALS, STANDALONE_PRINCIPAL] : BUS_PRINCIPALS,
  });
  logger.info(result, 'Kafka topics and ACLs are set up');
}

main().catch((error: unknown) => {
  process.stderr.write(`kafka-setup: ${error instanceof ConfigError ? error.message : error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
});
