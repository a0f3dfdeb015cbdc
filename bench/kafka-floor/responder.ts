import { Message } from 'kafkajs';
import { producerHandle } from '../../libs/messaging/src/kafka/client';
import { KAFKA_CONSUMER_TIMEOUTS, KAFKA_MAX_WAIT_MS } from '../../libs/messaging/src/kafka/consumers';
import { murmur2Partitioner } from '../../libs/messaging/src/kafka/partitioner';
import { BatchingSender } from '../../libs/messaging/src/kafka/producers';
import { CORRELATION_HEADER, floorKafka, FLOOR_REQUEST_PARTITIONS, FLOOR_REQUESTS_TOPIC, FLOOR_RESPONDER_GROUP, REPLY_TO_HEADER, stopOnSignal } from './wire';

/** Offsets are committed at most this often, as the bus does (COMMIT_INTERVAL_MS). */
const COMMIT_INTERVAL_MS = 1_000;

/**
 * The floor's answering side: reads the requests (every partition at once) and answers each
 * fetched batch with one send per reply topic, carrying FLOOR_BODY; the sends are not awaited
 * before the next fetch, as the bus runs its handlers beside its fetches.
 */
async function main(): Promise<void> {
  const body = process.env.FLOOR_BODY;
  if (!body) throw new Error('FLOOR_BODY is not set');
  const kafka = floorKafka('bench-floor-responder');
  const producer = producerHandle(kafka, { createPartitioner: murmur2Partitioner, allowAutoTopicCreation: false, retry: { retries: 2 } });
  await producer.connect();
  // As the bus's reply sender: one produce request per reply topic, several in flight.
  const sender = new BatchingSender<Message>((topicMessages) => producer.send({ topicMessages, acks: -1 }), { perTopic: true, maxInFlight: 8 });
  // A group of its own: requests left in the topic by an earlier run (on a broker KAFKA_BROKERS names) are not answered.
  const groupId = `${FLOOR_RESPONDER_GROUP}.${process.pid}`;
  const consumer = kafka.consumer({ groupId, ...KAFKA_CONSUMER_TIMEOUTS, maxWaitTimeInMs: KAFKA_MAX_WAIT_MS, allowAutoTopicCreation: false });
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic: FLOOR_REQUESTS_TOPIC, numPartitions: FLOOR_REQUEST_PARTITIONS }], waitForLeaders: true });
  await admin.disconnect();
  await consumer.connect();
  // From the end: a request sent before the group has joined goes unanswered; the target's first
  // request is repeated until one is answered (and the front gives up on the others).
  await consumer.subscribe({ topics: [FLOOR_REQUESTS_TOPIC], fromBeginning: false });
  await consumer.run({
    partitionsConsumedConcurrently: FLOOR_REQUEST_PARTITIONS,
    autoCommitInterval: COMMIT_INTERVAL_MS,
    eachBatch: async ({ batch }) => {
      const byTopic = new Map<string, Message[]>();
      for (const message of batch.messages) {
        const replyTo = message.headers?.[REPLY_TO_HEADER]?.toString();
        const correlation = message.headers?.[CORRELATION_HEADER]?.toString();
        if (!replyTo || !correlation) continue;
        const replies = byTopic.get(replyTo) ?? [];
        replies.push({ value: body, headers: { [CORRELATION_HEADER]: correlation } });
        byTopic.set(replyTo, replies);
      }
      for (const [topic, replies] of byTopic) {
        sender.send(topic, replies).catch((error: unknown) => process.stderr.write(`reply to ${topic} not sent: ${String(error)}\n`));
      }
    },
  });
  stopOnSignal(async () => {
    await consumer.disconnect();
    await producer.disconnect();
    const cleanup = kafka.admin();
    await cleanup.connect();
    await cleanup.deleteGroups([groupId]).catch(() => undefined);
    await cleanup.disconnect();
  });
}

main().catch((error: unknown) => {
  process.stderr.write(`kafka-floor responder failed to start: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
