import { Message, Partitioners } from 'kafkajs';
import { producerHandle } from '../../libs/messaging/src/kafka/client';
import { KAFKA_CONSUMER_TIMEOUTS, KAFKA_MAX_WAIT_MS } from '../../libs/messaging/src/kafka/consumers';
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
  const producer = producerHandle(kafka, { createPartitioner: Partitioners.DefaultPartitioner, allowAutoTopicCreation: false, retry: { retries: 2 } });
  await producer.connect();
  // As the bus's reply sender: one produce request per reply topic, several in flight.
  const sender = new BatchingSender<Message>((topicMessages) => producer.send({ topicMessages, acks: -1 }), { perTopic: true, maxInFlight: 8 });
  const consumer = kafka.consumer({ groupId: FLOOR_RESPONDER_GROUP, ...KAFKA_CONSUMER_TIMEOUTS, maxWaitTimeInMs: KAFKA_MAX_WAIT_MS, allowAutoTopicCreation: false });
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic: FLOOR_REQUESTS_TOPIC, numPartitions: FLOOR_REQUEST_PARTITIONS }], waitForLeaders: true });
  await admin.disconnect();
  await consumer.connect();
  // From the beginning: requests sent before the group had joined (the target's first ones) are answered too.
  await consumer.subscribe({ topics: [FLOOR_REQUESTS_TOPIC], fromBeginning: true });
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
  });
}

main().catch((error: unknown) => {
  process.stderr.write(`kafka-floor responder failed to start: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
