/**
 * The kafkajs client of a bus and the topic administration it does at start: creating missing
 * topics and waiting for their leaders.
 */
import type * as tls from 'node:tls';
import { Admin, ITopicMetadata, Kafka, logCreator, logLevel, ProducerConfig, SASLOptions } from 'kafkajs';
import { BusLogger, consoleBusLogger, describe } from '../delivery';
import { busLogEntry, mergeTopicSpecs, TopicSpec } from './kafka-mapping';
import { ProducerHandle } from './producers';
import { fixKafkajsProduceRequest } from './produce-request-fix';
import { fixKafkajsRecordDecoder } from './record-decoder-fix';
import { fixKafkajsRecordEncoder } from './record-encoder-fix';
import { fixKafkajsRequestQueue } from './request-queue-fix';

const TOPIC_TIMEOUT_MS = 15_000;

/** Routes kafkajs's own logging to a BusLogger, WARN and above, as structured entries. */
export function kafkaLogCreator(logger: BusLogger): logCreator {
  return () => (entry) => {
    const mapped = busLogEntry(entry);
    if (mapped) logger[mapped.level](mapped.message, mapped.context);
  };
}

let requestQueueWarned = false;
let recordEncoderWarned = false;
let recordDecoderWarned = false;
let produceRequestWarned = false;

export function kafkaClient(brokers: string[], clientId: string, ssl: tls.ConnectionOptions | boolean | undefined, logger: BusLogger, sasl?: SASLOptions): Kafka {
  if (brokers.length === 0) throw new Error('Kafka needs at least one broker address');
  // Before any connection exists: an idle kafkajs connection otherwise wakes the process every millisecond.
  if (!fixKafkajsRequestQueue() && !requestQueueWarned) {
    requestQueueWarned = true;
    logger.warn('kafkajs is not the version its request-queue fix was written for; it runs unfixed', { fix: 'libs/messaging/src/kafka/request-queue-fix.ts' });
  }
  // Before the first produce request is encoded: kafkajs loads its record encoder then.
  if (!fixKafkajsRecordEncoder() && !recordEncoderWarned) {
    recordEncoderWarned = true;
    logger.warn('kafkajs records are encoded as shipped (ten zero-filled buffers a message): its record module is not the one the fix was written for, or was loaded first', {
      fix: 'libs/messaging/src/kafka/record-encoder-fix.ts',
    });
  }
  // After the record encoder's fix (the request encodes its records with it), before the first produce request.
  if (!fixKafkajsProduceRequest() && !produceRequestWarned) {
    produceRequestWarned = true;
    logger.warn(
      'kafkajs produce requests are encoded as shipped (eight nested zero-filled buffers a request): its produce request, record batch or Encoder module is not the one the fix was written for, or was loaded first',
      {
        fix: 'libs/messaging/src/kafka/produce-request-fix.ts',
      },
    );
  }
  // Before the first fetch response is decoded: kafkajs loads its record batch decoder then.
  if (!fixKafkajsRecordDecoder() && !recordDecoderWarned) {
    recordDecoderWarned = true;
    logger.warn('kafkajs records are decoded as shipped (an object spread per header): its record decoder is not the one the fix was written for, or was loaded first', {
      fix: 'libs/messaging/src/kafka/record-decoder-fix.ts',
    });
  }
  return new Kafka({ brokers, clientId, ssl, ...(sasl ? { sasl } : {}), logLevel: logLevel.WARN, logCreator: kafkaLogCreator(logger) });
}

/** A kafkajs producer that knows whether it is connected; `send` takes kafkajs's `sendBatch` record. */
export function producerHandle(kafka: Kafka, config: ProducerConfig): ProducerHandle<Parameters<ReturnType<Kafka['producer']>['sendBatch']>[0]> {
  const producer = kafka.producer(config);
  let connected = false;
  producer.on(producer.events.CONNECT, () => (connected = true));
  producer.on(producer.events.DISCONNECT, () => (connected = false));
  return {
    connect: () => producer.connect(),
    disconnect: () => producer.disconnect(),
    send: (record) => producer.sendBatch(record),
    isConnected: () => connected,
  };
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** The topics a CreateTopics request was refused for want of authorization (kafkajs gathers one error per topic). */
function refusedTopics(error: unknown): string[] {
  const { errors } = error as { errors?: unknown[] };
  return (errors ?? []).flatMap((inner) => {
    const { type, topic } = inner as { type?: string; topic?: string };
    return /AUTHORIZATION_FAILED/.test(type ?? '') && topic ? [topic] : [];
  });
}

/** Waits until every partition of `names` has a leader; returns their metadata. */
export async function waitForLeaders(admin: Admin, names: string[], timeoutMs: number = TOPIC_TIMEOUT_MS): Promise<ITopicMetadata[]> {
  const deadline = Date.now() + timeoutMs;
  let last = 'no metadata yet';
  for (;;) {
    try {
      const { topics } = await admin.fetchTopicMetadata({ topics: names });
      const ready = names.every((name) => {
        const topic = topics.find((t) => t.name === name);
        return topic !== undefined && topic.partitions.length > 0 && topic.partitions.every((p) => p.leader >= 0 && p.partitionErrorCode === 0);
      });
      if (ready) return topics;
      last = 'a partition has no leader yet';
    } catch (error) {
      last = describe(error);
    }
    if (Date.now() > deadline) throw new Error(`Topics ${names.join(', ')} not ready within ${timeoutMs} ms: ${last}`);
    await sleep(100);
  }
}

/**
 * Creates the topics that are missing and waits until every listed topic has its leaders.
 * "Already exists" is fine (another instance won the race); existing topics are never altered.
 * Returns the partition count of each listed topic.
 */
export async function ensureTopicsWith(admin: Admin, specs: ReadonlyArray<TopicSpec>, logger: BusLogger): Promise<Map<string, number>> {
  const topics = mergeTopicSpecs(specs);
  if (topics.length === 0) return new Map();
  const existing = new Set(await admin.listTopics());
  const missing = topics.filter((topic) => !existing.has(topic.name));
  if (missing.length > 0) {
    // Leaders are awaited below, not here: kafkajs's own wait fails outright when another process
    // created one of these topics a moment ago and its metadata has not reached the broker yet.
    await admin
      .createTopics({
        topics: missing.map((topic) => ({
          topic: topic.name,
          numPartitions: topic.partitions,
          ...(topic.maxMessageBytes ? { configEntries: [{ name: 'max.message.bytes', value: String(topic.maxMessageBytes) }] } : {}),
        })),
        waitForLeaders: false,
        timeout: TOPIC_TIMEOUT_MS,
      })
      .catch((error: unknown) => {
        // Under ACLs a service may create only its own reply topics: the platform's come from the setup.
        const refused = refusedTopics(error);
        if (refused.length > 0) {
          throw new Error(`Topics ${refused.join(', ')} are missing and this client may not create them: run the platform's Kafka setup (npm run kafka:setup) first`);
        }
        throw error;
      });
  }
  const metadata = await waitForLeaders(
    admin,
    topics.map((topic) => topic.name),
  );
  const partitions = new Map(metadata.map((topic) => [topic.name, topic.partitions.length]));
  for (const topic of topics) {
    const actual = partitions.get(topic.name) ?? 0;
    if (actual < topic.partitions) {
      logger.warn('Topic has fewer partitions than configured; left as is', { topic: topic.name, configured: topic.partitions, actual });
    }
  }
  return partitions;
}

/** Creates missing topics (with leaders elected) for tooling, tests and deploy scripts. */
export async function ensureTopics(
  brokers: string[],
  topics: ReadonlyArray<TopicSpec>,
  ssl?: tls.ConnectionOptions | boolean,
  logger: BusLogger = consoleBusLogger,
  sasl?: SASLOptions,
): Promise<void> {
  const admin = kafkaClient(brokers, 'ensure-topics', ssl, logger, sasl).admin();
  await admin.connect();
  try {
    await ensureTopicsWith(admin, topics, logger);
  } finally {
    await admin.disconnect();
  }
}
