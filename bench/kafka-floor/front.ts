import 'reflect-metadata';
import { Controller, DynamicModule, Get, Header, Inject, Module, Param } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import { randomUUID } from 'node:crypto';
import { KafkaMessage, Message } from 'kafkajs';
import { producerHandle } from '../../libs/messaging/src/kafka/client';
import { KAFKA_CONSUMER_TIMEOUTS, KAFKA_MAX_WAIT_MS } from '../../libs/messaging/src/kafka/consumers';
import { murmur2Partitioner } from '../../libs/messaging/src/kafka/partitioner';
import { BatchingSender } from '../../libs/messaging/src/kafka/producers';
import { CORRELATION_HEADER, floorKafka, FLOOR_REQUESTS_TOPIC, REPLY_TO_HEADER, stopOnSignal } from './wire';

/** How long a request waits for its reply (the benchmark's own timeout). */
export const FLOOR_REPLY_TIMEOUT_MS = 10_000;

/**
 * Requests in flight by correlation id, answered by the replies the consumer reads. Each record
 * gets a key of its own, as the bus gives a request (`defaultRequestKey`): requests spread over
 * the topic's partitions.
 */
export class FloorRequester {
  private readonly waiting = new Map<string, { resolve: (body: string) => void; reject: (error: unknown) => void; timer: NodeJS.Timeout }>();
  private last = 0;

  constructor(
    private readonly sender: Pick<BatchingSender<Message>, 'send'>,
    private readonly replyTopic: string,
    private readonly timeoutMs = FLOOR_REPLY_TIMEOUT_MS,
  ) {}

  /** Requests waiting for their reply. */
  get pending(): number {
    return this.waiting.size;
  }

  request(id: string): Promise<string> {
    const correlation = String(++this.last);
    return new Promise<string>((resolve, reject) => {
      const fail = (error: unknown): void => {
        const waiting = this.waiting.get(correlation);
        if (!waiting) return;
        clearTimeout(waiting.timer);
        this.waiting.delete(correlation);
        reject(error);
      };
      const timer = setTimeout(() => fail(new Error(`No reply within ${this.timeoutMs} ms`)), this.timeoutMs);
      this.waiting.set(correlation, { resolve, reject, timer });
      this.sender.send(FLOOR_REQUESTS_TOPIC, [{ key: randomUUID(), value: id, headers: { [CORRELATION_HEADER]: correlation, [REPLY_TO_HEADER]: this.replyTopic } }]).catch(fail);
    });
  }

  /** A reply read from the reply topic: answers its request, if it still waits. */
  answer(message: Pick<KafkaMessage, 'headers' | 'value'>): void {
    const correlation = message.headers?.[CORRELATION_HEADER]?.toString();
    const waiting = correlation === undefined ? undefined : this.waiting.get(correlation);
    if (!waiting || correlation === undefined) return;
    clearTimeout(waiting.timer);
    this.waiting.delete(correlation);
    waiting.resolve(message.value?.toString('utf8') ?? '');
  }
}

const REQUESTER = Symbol('REQUESTER');

/** The route the other targets serve, answering what the responder sent back. */
@Controller('api/missions')
class FloorController {
  constructor(@Inject(REQUESTER) private readonly requester: FloorRequester) {}

  @Get(':id')
  @Header('content-type', 'application/json; charset=utf-8')
  get(@Param('id') id: string): Promise<string> {
    return this.requester.request(id);
  }
}

@Module({})
class FloorModule {
  static with(requester: FloorRequester): DynamicModule {
    return { module: FloorModule, controllers: [FloorController], providers: [{ provide: REQUESTER, useValue: requester }] };
  }
}

/** The floor's HTTP side: a bare NestJS-on-Fastify route that forwards over Kafka (wire.ts). */
async function main(): Promise<void> {
  const kafka = floorKafka('bench-floor-front');
  const replyTopic = `bench.floor.replies.${process.pid}`;
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic: replyTopic, numPartitions: 1 }], waitForLeaders: true });
  await admin.disconnect();

  const producer = producerHandle(kafka, { idempotent: true, createPartitioner: murmur2Partitioner, allowAutoTopicCreation: false });
  await producer.connect();
  const sender = new BatchingSender<Message>((topicMessages) => producer.send({ topicMessages, acks: -1 }));
  const requester = new FloorRequester(sender, replyTopic);

  const consumer = kafka.consumer({ groupId: replyTopic, ...KAFKA_CONSUMER_TIMEOUTS, maxWaitTimeInMs: KAFKA_MAX_WAIT_MS, allowAutoTopicCreation: false });
  await consumer.connect();
  await consumer.subscribe({ topics: [replyTopic], fromBeginning: true });
  // Replies need no commits: the group lives as long as this process, as the bus's reply groups do.
  await consumer.run({ autoCommit: false, eachBatch: async ({ batch }) => batch.messages.forEach((message) => requester.answer(message)) });

  const app = await NestFactory.create<NestFastifyApplication>(FloorModule.with(requester), new FastifyAdapter({ logger: false }), { logger: ['error', 'warn'] });
  await app.listen(Number(process.env.PORT ?? 3100), process.env.HOST ?? '127.0.0.1');
  stopOnSignal(async () => {
    await app.close();
    await consumer.disconnect();
    await producer.disconnect();
    // The reply topic and its group were this process's alone (a broker KAFKA_BROKERS names outlives it).
    const cleanup = kafka.admin();
    await cleanup.connect();
    await cleanup.deleteGroups([replyTopic]).catch(() => undefined);
    await cleanup.deleteTopics({ topics: [replyTopic] }).catch(() => undefined);
    await cleanup.disconnect();
  });
}

if (require.main === module) {
  main().catch((error: unknown) => {
    process.stderr.write(`kafka-floor front failed to start: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  });
}
