import type { Registry } from 'prom-client';
import { Topics, TOPIC_MAX_MESSAGE_BYTES, TOPIC_PARTITIONS } from '@mission/contracts';
import { env } from '@mission/config';
import { DEFAULT_MAX_IN_FLIGHT, KafkaBus } from '@mission/messaging';
import { contextLogger, Logger } from './logger';
import { busMetrics } from './metrics';
import { PayloadKeys, sealedPayloads } from './payload-keys';
import { kafkaTls } from './tls-settings';
import { KafkaSaslConfig, kafkaSasl } from './kafka-auth';

/**
 * How many request handlers, and separately event handlers, a process runs at once (bus-wide);
 * more wait, and their consumers fetch nothing new until there is room (backpressure).
 */
export const BusSettings = {
  BUS_MAX_IN_FLIGHT: env.positiveInt(DEFAULT_MAX_IN_FLIGHT),
};

/** Every topic of the platform, so any process can create what is missing before it consumes. */
export function platformTopics(): Array<{ name: string; partitions: number; maxMessageBytes?: number }> {
  return Object.values(Topics).map((name) => {
    const maxMessageBytes = TOPIC_MAX_MESSAGE_BYTES[name];
    return { name, partitions: TOPIC_PARTITIONS[name], ...(maxMessageBytes ? { maxMessageBytes } : {}) };
  });
}

/**
 * The Kafka bus every process of the platform uses: the configured brokers over TLS when asked,
 * signed in as its own principal when SASL is configured (the client id is that principal's name
 * in the platform's ACLs), payloads sealed under the tenants' data keys, every platform topic ensured, metrics and logs.
 */
export async function platformKafkaBus(options: {
  readonly config: KafkaSaslConfig & { readonly KAFKA_BROKERS: string[]; readonly KAFKA_TLS: 'on' | 'off'; readonly KAFKA_TLS_CA?: string; readonly BUS_MAX_IN_FLIGHT?: number };
  readonly clientId: string;
  readonly payloadKeys: PayloadKeys;
  readonly logger: Logger;
  readonly metrics: Registry;
}): Promise<KafkaBus> {
  return new KafkaBus({
    brokers: options.config.KAFKA_BROKERS,
    ssl: await kafkaTls(options.config),
    sasl: await kafkaSasl(options.config),
    codec: sealedPayloads(options.payloadKeys),
    clientId: options.clientId,
    topics: platformTopics(),
    logger: contextLogger(options.logger.child({ component: 'bus' })),
    metrics: busMetrics(options.metrics),
    maxInFlight: options.config.BUS_MAX_IN_FLIGHT,
  });
}
