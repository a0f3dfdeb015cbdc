import { promises as fs } from 'node:fs';
import type { SASLOptions } from 'kafkajs';
import { z } from 'zod';
import { ConfigError } from '@mission/config';

/**
 * How a process signs in to Kafka: SASL with its own user (SCRAM, or PLAIN over TLS only), the
 * password read from a file (a mounted Secret in Kubernetes), never from the environment. Unset:
 * no SASL, for a broker without authentication (local development without ACLs).
 */
export const KafkaSaslSettings = {
  KAFKA_SASL_MECHANISM: z.enum(['scram-sha-512', 'scram-sha-256', 'plain']).optional(),
  KAFKA_SASL_USERNAME: z.string().trim().min(1).max(255).optional(),
  KAFKA_SASL_PASSWORD_FILE: z.string().trim().min(1).optional(),
};

export interface KafkaSaslConfig {
  readonly KAFKA_SASL_MECHANISM?: 'scram-sha-512' | 'scram-sha-256' | 'plain';
  readonly KAFKA_SASL_USERNAME?: string;
  readonly KAFKA_SASL_PASSWORD_FILE?: string;
  readonly KAFKA_TLS?: 'on' | 'off';
  readonly KAFKA_TLS_CA?: string;
}

/** The kafkajs `sasl` option, or undefined without SASL; a partial setting is refused with every reason. */
export async function kafkaSasl(config: KafkaSaslConfig): Promise<SASLOptions | undefined> {
  const { KAFKA_SASL_MECHANISM: mechanism, KAFKA_SASL_USERNAME: username, KAFKA_SASL_PASSWORD_FILE: passwordFile } = config;
  if (!mechanism && !username && !passwordFile) return undefined;
  const problems = [
    ...(mechanism ? [] : ['KAFKA_SASL_MECHANISM: required with KAFKA_SASL_USERNAME or KAFKA_SASL_PASSWORD_FILE']),
    ...(username ? [] : ['KAFKA_SASL_USERNAME: required with KAFKA_SASL_MECHANISM']),
    ...(passwordFile ? [] : ['KAFKA_SASL_PASSWORD_FILE: required with KAFKA_SASL_MECHANISM']),
    // PLAIN sends the password itself: only inside TLS.
    ...(mechanism === 'plain' && config.KAFKA_TLS !== 'on' && !config.KAFKA_TLS_CA ? ['KAFKA_SASL_MECHANISM: plain sends the password as it is; it needs KAFKA_TLS=on'] : []),
  ];
  if (problems.length > 0) throw new ConfigError(problems);
  const text = await fs.readFile(passwordFile as string, 'utf8').catch((error: NodeJS.ErrnoException) => {
    throw new ConfigError([`KAFKA_SASL_PASSWORD_FILE: cannot be read (${error.code ?? error.message})`]);
  });
  const password = text.replace(/\r?\n$/, '');
  if (password.length === 0 || /[\r\n]/.test(password)) throw new ConfigError(['KAFKA_SASL_PASSWORD_FILE: must hold one non-empty line']);
  return { mechanism: mechanism as 'scram-sha-512', username: username as string, password };
}
