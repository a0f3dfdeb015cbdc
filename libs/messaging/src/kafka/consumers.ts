/**
 * The consumers of a Kafka bus: how each joins its group, and how one that kafkajs gave up on is
 * replaced, for as long as the bus runs, so that no outage leaves a group without its member.
 */
import { Consumer, EachBatchPayload, Kafka } from 'kafkajs';
import { BusMetrics } from '../bus';
import { BusLogger, describe } from '../delivery';
import { sleep } from './client';
import { withTimeout } from './kafka-mapping';

/**
 * Consumer session settings: a dead instance loses its partitions within 15 s, rebalances are seen
 * within 1.5 s. The session must stay longer than a request's deadline (10 s by default): the
 * requests a crashed instance had taken but not committed reach its successor past their deadline
 * and are skipped. With a shorter session they may run again, and a request handler need not be
 * idempotent (creating a webhook is not).
 */
export const KAFKA_CONSUMER_TIMEOUTS = { sessionTimeout: 15_000, heartbeatInterval: 1_500, rebalanceTimeout: 60_000 } as const;
/**
 * How long an idle fetch waits at the broker. A fetch returns as soon as one record is there, so
 * this costs no latency; it only sets how often idle consumers poll (at 100 ms, a dozen idle
 * consumers kept a fifth of a broker core busy).
 */
export const KAFKA_MAX_WAIT_MS = 1000;
const START_TIMEOUT_MS = 60_000;
/** A consumer that kafkajs stopped for good is replaced after 1 s, doubling up to 30 s while it keeps failing. */
const CONSUMER_REPLACE_DELAY_MS = 1_000;
const CONSUMER_REPLACE_MAX_DELAY_MS = 30_000;

/** How a partition is named in assignments and dispatcher state. */
export function partitionId(topic: string, partition: number): string {
  return `${topic}\u0000${partition}`;
}

export interface ConsumerPlan {
  readonly name: string;
  readonly groupId: string;
  readonly topics: string[];
  /** Disconnected last: handlers in flight may still await replies. */
  readonly isReplyConsumer: boolean;
  /** Partitions kafkajs hands to eachBatch at once. */
  readonly concurrency: number;
  /**
   * kafkajs resolves and commits each batch once eachBatch returns (true), or eachBatch resolves
   * offsets itself and commits go through commit() (false: handling outlives the batch).
   */
  readonly autoCommit: boolean;
  /** Where a group without committed offsets starts: the oldest message (the default), or the next one published. */
  readonly fromBeginning?: boolean;
  readonly eachBatch: (payload: EachBatchPayload) => Promise<void>;
  /** The partitions the group gave this member (after each join), as `topic` → partitions. */
  readonly onAssigned?: (assignment: Readonly<Record<string, readonly number[]>>) => void;
}

type ConsumerStatus = 'joining' | 'up' | 'crashed' | 'disconnected';

interface ConsumerEntry {
  readonly plan: ConsumerPlan;
  /** Replaced when kafkajs gives up on it. */
  consumer: Consumer;
  status: ConsumerStatus;
  detail?: string;
  /** Replacements since it last joined its group (for the backoff). */
  replacements: number;
  /** `topic\u0000partition` of what the group assigned this member at its last join. */
  assigned: ReadonlySet<string>;
}

export class ConsumerFleet {
  private readonly entries: ConsumerEntry[] = [];
  /** Consumers being replaced (see replace). */
  private readonly replacing = new Set<Promise<void>>();

  constructor(
    private readonly kafka: Kafka,
    private readonly logger: BusLogger,
    private readonly metrics: BusMetrics,
    /** Whether the bus still runs: a consumer is replaced only then. */
    private readonly running: () => boolean,
    /** Settles when the bus begins to close: cuts a replacement's wait short. */
    private readonly closing: Promise<void>,
  ) {}

  /** Connects, subscribes and runs one consumer; resolves once it has joined its group. */
  async start(plan: ConsumerPlan): Promise<void> {
    const entry: ConsumerEntry = { plan, consumer: this.create(plan), status: 'joining', replacements: 0, assigned: new Set() };
    this.entries.push(entry);
    await withTimeout(this.run(entry), START_TIMEOUT_MS, () => new Error(`${plan.name} did not join group ${plan.groupId} within ${START_TIMEOUT_MS} ms`));
  }

  /**
   * Commits positions for the group of plan `name`, through its current consumer, for the
   * partitions the group assigned it: one taken away in a rebalance belongs to its new member,
   * whose commits ours must not overwrite.
   */
  async commit(name: string, positions: Array<{ topic: string; partition: number; offset: string }>): Promise<void> {
    const entry = this.entry(name);
    const mine = positions.filter(({ topic, partition }) => entry.assigned.has(partitionId(topic, partition)));
    if (mine.length > 0) await entry.consumer.commitOffsets(mine);
  }

  /** Makes the group of plan `name` read `partition` again from `offset` (if it still has it). */
  seek(name: string, topic: string, partition: number, offset: string): void {
    try {
      this.entry(name).consumer.seek({ topic, partition, offset });
    } catch (error) {
      // Not running (replaced or stopping): a rejoin reads from the committed position anyway.
      this.logger.warn('Seek skipped', { consumer: name, topic, partition, offset, error: describe(error) });
    }
  }

  /** What is wrong with the consumers, one line each; empty when every one is up. */
  problems(): string[] {
    return this.entries.filter((entry) => entry.status !== 'up').map((entry) => `${entry.plan.name} ${entry.status}${entry.detail ? ` (${entry.detail})` : ''}`);
  }

  /**
   * Stops the consumers: `quiesce` first (handlers finish and their offsets are committed while
   * the consumers are still members), then the serving and subscribing consumers leave; the
   * reply consumer goes after `drain` (work still in flight may await replies).
   */
  async stop(quiesce: () => Promise<void>, drain: () => Promise<void>): Promise<void> {
    const disconnect = async (replies: boolean): Promise<void> => {
      await Promise.allSettled(this.entries.filter((entry) => entry.plan.isReplyConsumer === replies).map((entry) => entry.consumer.disconnect()));
    };
    await quiesce();
    await disconnect(false);
    // A replacement that was connecting may have connected after that: disconnect it again.
    while (this.replacing.size > 0) await Promise.allSettled([...this.replacing]);
    await disconnect(false);
    await drain();
    await disconnect(true);
  }

  private entry(name: string): ConsumerEntry {
    const entry = this.entries.find((candidate) => candidate.plan.name === name);
    if (!entry) throw new Error(`No consumer ${name}`);
    return entry;
  }

  private create(plan: ConsumerPlan): Consumer {
    return this.kafka.consumer({
      groupId: plan.groupId,
      ...KAFKA_CONSUMER_TIMEOUTS,
      maxWaitTimeInMs: KAFKA_MAX_WAIT_MS,
      allowAutoTopicCreation: false,
    });
  }

  /**
   * Runs the entry's consumer; resolves once it has joined its group. kafkajs restarts a consumer
   * itself after retriable failures; one it gives up on (a crash without restart) is replaced by
   * a fresh consumer after a backoff.
   */
  private async run(entry: ConsumerEntry): Promise<void> {
    const { consumer, plan } = entry;
    const joined = new Promise<void>((resolve, reject) => {
      consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
        const assignment = payload.memberAssignment;
        entry.assigned = new Set(Object.entries(assignment).flatMap(([topic, partitions]) => partitions.map((partition) => partitionId(topic, partition))));
        plan.onAssigned?.(assignment);
        this.metrics.assigned(plan.groupId);
        entry.status = 'up';
        entry.detail = undefined;
        entry.replacements = 0;
        resolve();
      });
      consumer.on(consumer.events.CRASH, (event) => {
        if (entry.consumer !== consumer) return;
        entry.status = 'crashed';
        entry.detail = describe(event.payload.error);
        if (event.payload.restart) return;
        reject(event.payload.error);
        if (this.running()) this.replace(entry, consumer);
        else this.logger.error('Consumer stopped for good', { consumer: plan.name, group: plan.groupId, error: entry.detail });
      });
      consumer.on(consumer.events.END_BATCH_PROCESS, ({ payload }) => {
        this.metrics.lag(payload.topic, plan.groupId, payload.partition, Number(payload.offsetLag));
      });
      consumer.on(consumer.events.DISCONNECT, () => {
        if (entry.consumer === consumer && entry.status !== 'crashed') entry.status = 'disconnected';
        reject(new Error(`${plan.name} disconnected`));
      });
    });
    joined.catch(() => undefined);
    await consumer.connect();
    await consumer.subscribe({ topics: plan.topics, fromBeginning: plan.fromBeginning ?? true });
    await consumer.run({ partitionsConsumedConcurrently: plan.concurrency, autoCommit: plan.autoCommit, eachBatchAutoResolve: plan.autoCommit, eachBatch: plan.eachBatch });
    await joined;
  }

  private replace(entry: ConsumerEntry, failed: Consumer): void {
    const delayMs = Math.min(CONSUMER_REPLACE_MAX_DELAY_MS, CONSUMER_REPLACE_DELAY_MS * 2 ** entry.replacements);
    entry.replacements++;
    this.logger.error('Consumer stopped by kafkajs; replacing it', { consumer: entry.plan.name, group: entry.plan.groupId, error: entry.detail, inMs: delayMs });
    const replacing = (async () => {
      await failed.disconnect().catch(() => undefined);
      await Promise.race([sleep(delayMs), this.closing]);
      if (!this.running() || entry.consumer !== failed) return;
      const replacement = this.create(entry.plan);
      entry.consumer = replacement;
      entry.status = 'joining';
      try {
        await this.run(entry);
      } catch (error) {
        if (!this.running() || entry.consumer !== replacement) return;
        // A crash while joining has scheduled the next replacement already (the CRASH listener);
        // a failed connect or subscribe reports no crash, so it is retried from here.
        if ((entry.status as ConsumerStatus) === 'crashed') return;
        entry.status = 'crashed';
        entry.detail = describe(error);
        this.replace(entry, replacement);
      }
    })().finally(() => this.replacing.delete(replacing));
    // stop() waits for it, then disconnects whatever consumer the entry ended up with.
    this.replacing.add(replacing);
  }
}
