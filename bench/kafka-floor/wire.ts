/**
 * What the two processes of the `kafka-floor` target share: how they reach the broker, the topics,
 * and the message shapes. The floor is the Kafka path's round trip with nothing of ours around it
 * but the transport's own batching: an HTTP route sends each request as one record (a key of
 * its own, as the bus's requests have; its correlation id and reply topic in two headers) to a
 * topic of six partitions through an idempotent producer (`acks=all`), gathering the records of
 * one turn of the event loop into one produce request as the platform's bus does
 * (BatchingSender); a responder answers each record
 * with the mission's body, one send per reply topic per fetched batch; the route answers what
 * comes back. No authentication, rate limit, codec, encryption, database or handler.
 */
import { readFileSync } from 'node:fs';
import type { Kafka, SASLOptions } from 'kafkajs';
import { consoleBusLogger } from '../../libs/messaging/src/delivery';
import { kafkaClient } from '../../libs/messaging/src/kafka/client';

/** The requests' topic: as many partitions as the platform's request topics. */
export const FLOOR_REQUESTS_TOPIC = 'bench.floor.requests';
export const FLOOR_REQUEST_PARTITIONS = 6;
export const FLOOR_RESPONDER_GROUP = 'bench.floor.responder';

/** Headers of a request: its correlation id, and the topic its reply goes to. */
export const CORRELATION_HEADER = 'c';
export const REPLY_TO_HEADER = 'r';

/** The floor's client of the broker the target gives (KAFKA_BROKERS, and SASL when it asks for it). */
export function floorKafka(clientId: string, env: NodeJS.ProcessEnv = process.env): Kafka {
  const brokers = (env.KAFKA_BROKERS ?? '').split(',').filter(Boolean);
  if (brokers.length === 0) throw new Error('KAFKA_BROKERS is not set');
  let sasl: SASLOptions | undefined;
  if (env.KAFKA_SASL_MECHANISM && env.KAFKA_SASL_USERNAME && env.KAFKA_SASL_PASSWORD_FILE) {
    const password = readFileSync(env.KAFKA_SASL_PASSWORD_FILE, 'utf8').trim();
    sasl = { mechanism: env.KAFKA_SASL_MECHANISM as 'scram-sha-512', username: env.KAFKA_SASL_USERNAME, password };
  }
  return kafkaClient(brokers, clientId, undefined, consoleBusLogger, sasl);
}

/** Ends the process on SIGTERM or SIGINT once `close` resolves (exit 0), or at a second signal (exit 1). */
export function stopOnSignal(close: () => Promise<void>): void {
  let stopping = false;
  const stop = (): void => {
    if (stopping) process.exit(1);
    stopping = true;
    close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}
