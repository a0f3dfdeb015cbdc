import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { SASLOptions } from 'kafkajs';

const REPO_ROOT = path.resolve(__dirname, '..', '..');

/**
 * How a test reaches the run's broker. The broker `scripts/infra/kafka.mjs` starts authenticates
 * every client (SASL/SCRAM) and authorizes it by ACLs: each app signs in as its own principal
 * with the password the script generated for it, and tests that manage topics of their own sign
 * in as `admin`. A broker given by KAFKA_BROKERS alone takes anyone.
 */
export interface KafkaAccess {
  readonly brokers: string;
  /** `scram-sha-512` when the broker asks for SASL. */
  readonly mechanism?: string;
  /** `<user>.password` files, one per principal. */
  readonly credentialsDir?: string;
}

/** The run's broker, as the integration suite's global setup left it in the environment. */
export function kafkaAccessFromEnv(env: NodeJS.ProcessEnv = process.env): KafkaAccess {
  const brokers = env.KAFKA_BROKERS;
  if (!brokers) throw new Error('KAFKA_BROKERS is not set: the integration global setup should have started Kafka');
  return { brokers, ...(env.KAFKA_SASL_MECHANISM && env.KAFKA_CREDENTIALS_DIR ? { mechanism: env.KAFKA_SASL_MECHANISM, credentialsDir: env.KAFKA_CREDENTIALS_DIR } : {}) };
}

/** What `kafka.mjs start` printed. */
export function kafkaAccessFromStart(output: string): KafkaAccess {
  const brokers = /^KAFKA_BROKERS=(\S+)$/m.exec(output)?.[1];
  if (!brokers) throw new Error(`Kafka did not report its address:\n${output}`);
  const mechanism = /^KAFKA_SASL_MECHANISM=(\S+)$/m.exec(output)?.[1];
  const credentialsDir = /^KAFKA_CREDENTIALS_DIR=(.+)$/m.exec(output)?.[1];
  return { brokers, ...(mechanism && credentialsDir ? { mechanism, credentialsDir } : {}) };
}

/** The environment variables that make an app sign in as `principal`. */
export function kafkaEnvFor(access: KafkaAccess, principal: string): Record<string, string> {
  if (!access.mechanism || !access.credentialsDir) return { KAFKA_BROKERS: access.brokers };
  return {
    KAFKA_BROKERS: access.brokers,
    KAFKA_SASL_MECHANISM: access.mechanism,
    KAFKA_SASL_USERNAME: principal,
    KAFKA_SASL_PASSWORD_FILE: path.join(access.credentialsDir, `${principal}.password`),
  };
}

/** The kafkajs `sasl` option of `principal` (undefined for a broker without SASL). */
export function kafkaSaslFor(access: KafkaAccess, principal: string): SASLOptions | undefined {
  if (!access.mechanism || !access.credentialsDir) return undefined;
  const password = readFileSync(path.join(access.credentialsDir, `${principal}.password`), 'utf8').trim();
  return { mechanism: access.mechanism as 'scram-sha-512', username: principal, password };
}

/** Brokers and sign-in for a kafkajs client or a KafkaBus of the test itself. */
export function kafkaClientOptions(access: KafkaAccess, principal = 'admin'): { brokers: string[]; sasl?: SASLOptions } {
  const sasl = kafkaSaslFor(access, principal);
  return { brokers: access.brokers.split(','), ...(sasl ? { sasl } : {}) };
}

/** Runs the platform's Kafka setup (topics and ACLs) as `admin`, as a deployment's setup job does. */
export function setUpKafkaAsAdmin(access: KafkaAccess, extraEnv: Readonly<Record<string, string>> = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      ['-r', './tools/register.cjs', 'apps/kafka-setup/src/main.ts'],
      { cwd: REPO_ROOT, env: { ...process.env, LOG_LEVEL: 'info', ...extraEnv, ...kafkaEnvFor(access, 'admin') }, timeout: 120_000 },
      (error, stdout, stderr) => (error ? reject(new Error(`kafka-setup failed: ${error.message}\n${stderr}${stdout}`)) : resolve(stdout)),
    );
  });
}
