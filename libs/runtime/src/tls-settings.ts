import { promises as fs } from 'node:fs';
import type { ConnectionOptions } from 'node:tls';
import { z } from 'zod';
import { ConfigError } from '@mission/config';

const pemPath = () => z.string().trim().min(1);

/** An HTTPS server's certificate chain and private key, PEM files (gateway, idp). */
export const ServerTlsSettings = {
  TLS_CERT: pemPath().optional(),
  TLS_KEY: pemPath().optional(),
};

/** TLS to Kafka: `KAFKA_TLS=on` trusts the system's CAs, `KAFKA_TLS_CA` (a PEM file) those it names, and implies on. */
export const KafkaTlsSettings = {
  KAFKA_TLS: z.enum(['on', 'off']).default('off'),
  KAFKA_TLS_CA: pemPath().optional(),
};

/** The CAs a `rediss://` server must chain to (a PEM file); the system's when unset. */
export const RedisTlsSettings = {
  REDIS_TLS_CA: pemPath().optional(),
};

async function readPem(variable: string, file: string): Promise<string> {
  const text = await fs.readFile(file, 'utf8').catch((error: NodeJS.ErrnoException) => {
    throw new ConfigError([`${variable}: cannot be read (${error.code ?? error.message})`]);
  });
  if (!text.includes('-----BEGIN ')) throw new ConfigError([`${variable}: is not a PEM file`]);
  return text;
}

/** The server certificate and key, or undefined for plain HTTP; one without the other is refused. */
export async function serverTls(config: { readonly TLS_CERT?: string; readonly TLS_KEY?: string }): Promise<{ cert: string; key: string } | undefined> {
  if (!config.TLS_CERT && !config.TLS_KEY) return undefined;
  if (!config.TLS_CERT || !config.TLS_KEY) throw new ConfigError([`${config.TLS_CERT ? 'TLS_KEY' : 'TLS_CERT'}: required with ${config.TLS_CERT ? 'TLS_CERT' : 'TLS_KEY'}`]);
  return { cert: await readPem('TLS_CERT', config.TLS_CERT), key: await readPem('TLS_KEY', config.TLS_KEY) };
}

/** The kafkajs `ssl` option: undefined for plaintext, else TLS 1.2+ with the configured CA (or the system's). */
export async function kafkaTls(config: { readonly KAFKA_TLS: 'on' | 'off'; readonly KAFKA_TLS_CA?: string }): Promise<ConnectionOptions | undefined> {
  if (config.KAFKA_TLS === 'off' && !config.KAFKA_TLS_CA) return undefined;
  return { minVersion: 'TLSv1.2', ...(config.KAFKA_TLS_CA ? { ca: [await readPem('KAFKA_TLS_CA', config.KAFKA_TLS_CA)] } : {}) };
}

/** PEM of the CAs for a `rediss://` Redis, or undefined for the system's; refused with a plain `redis://` URL. */
export async function redisTlsCa(config: { readonly REDIS_URL?: string; readonly REDIS_TLS_CA?: string }): Promise<string | undefined> {
  if (!config.REDIS_TLS_CA) return undefined;
  if (!config.REDIS_URL?.startsWith('rediss:')) throw new ConfigError(['REDIS_TLS_CA: needs a rediss:// REDIS_URL']);
  return readPem('REDIS_TLS_CA', config.REDIS_TLS_CA);
}

/** An HTTPS gateway accepts tokens only from an HTTPS issuer: they would otherwise be fetched, and trusted, over plain HTTP. */
export function assertHttpsIssuer(tls: unknown, issuer: string): void {
  if (tls && !issuer.startsWith('https:')) throw new ConfigError(['IDP_ISSUER: must be https:// when the gateway serves HTTPS (TLS_CERT)']);
}
