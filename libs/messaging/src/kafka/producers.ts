/**
 * Producer plumbing that kafkajs lacks, kept free of kafkajs types so it is unit-tested alone:
 * renewing a producer that a deleted topic has broken, and batching concurrent sends.
 */
import { isStuckProducerError, isUnknownTopicError } from './kafka-mapping';
import { Fifo } from '../fifo';

/** What the adapter needs of a kafkajs producer. */
export interface ProducerHandle<R> {
  connect(): Promise<void>;
  disconnect(): Promise<void>;
  send(record: R): Promise<unknown>;
  isConnected(): boolean;
}

interface Slot<R> {
  readonly producer: ProducerHandle<R>;
  inFlight: number;
  retired: boolean;
}

export interface RenewingProducerOptions<R> {
  readonly create: () => ProducerHandle<R>;
  /** The topic a record goes to, for the missing-topic memory; undefined for a record of several topics. */
  readonly topicOf: (record: R) => string | undefined;
  /** Called before a broken producer is replaced. */
  readonly onRenew?: (error: unknown) => void;
  /** How long a topic found missing (by a fresh producer) fails at once, without a round trip. */
  readonly missingTopicTtlMs?: number;
  readonly now?: () => number;
}

/** The error a send to a topic known to be missing fails with, recognised by isUnknownTopicError. */
export function unknownTopicError(topic: string): Error {
  return Object.assign(new Error(`Topic ${topic} does not exist`), { type: 'UNKNOWN_TOPIC_OR_PARTITION' });
}

/**
 * A producer that replaces itself when a send fails with "unknown topic", or with an error that
 * leaves a kafkajs idempotent producer unable to send again (see isStuckProducerError).
 *
 * kafkajs puts every topic a producer has ever sent to into each later metadata request; once
 * one of them is deleted (a requester's reply topic, when it shuts down) every refresh fails,
 * and the producer cannot reach any new topic again (tulios/kafkajs#1146, #1622). A fresh
 * producer forgets those topics: the failed send is retried once on it, and an "unknown topic"
 * that survives the retry really is about the topic sent to. That topic then fails at once for
 * a while, so sends to it neither wait for kafkajs's retries nor renew the producer again.
 */
export class RenewingProducer<R> {
  private slot?: Slot<R>;
  private renewing?: Promise<void>;
  private closed = false;
  private readonly missing = new Map<string, number>();
  private readonly missingTopicTtlMs: number;
  private readonly now: () => number;

  constructor(private readonly options: RenewingProducerOptions<R>) {
    this.missingTopicTtlMs = options.missingTopicTtlMs ?? 60_000;
    this.now = options.now ?? Date.now;
  }

  async connect(): Promise<void> {
    const producer = this.options.create();
    await producer.connect();
    this.slot = { producer, inFlight: 0, retired: false };
  }

  isConnected(): boolean {
    return !this.closed && this.slot !== undefined && this.slot.producer.isConnected();
  }

  async send(record: R): Promise<unknown> {
    const topic = this.options.topicOf(record);
    const missingUntil = topic === undefined ? undefined : this.missing.get(topic);
    if (topic !== undefined && missingUntil !== undefined) {
      if (missingUntil > this.now()) throw unknownTopicError(topic);
      this.missing.delete(topic);
    }
    const slot = this.current();
    try {
      return await this.sendOn(slot, record);
    } catch (error) {
      if (this.closed) throw error;
      if (isStuckProducerError(error)) {
        // Replaced for the sends to come, but this one fails: with several brokers part of the
        // batch may have been written already, and a request (unlike an event) has no consumer
        // that would absorb a second copy. The caller sees a failure (503, or an outbox retry).
        await this.renew(slot, error);
        throw error;
      }
      if (!isUnknownTopicError(error)) throw error;
      await this.renew(slot, error);
      try {
        return await this.sendOn(this.current(), record);
      } catch (retryError) {
        if (topic !== undefined && isUnknownTopicError(retryError)) this.missing.set(topic, this.now() + this.missingTopicTtlMs);
        throw retryError;
      }
    }
  }

  /** Disconnects the current producer; replaced ones disconnect once their sends are done. */
  async disconnect(): Promise<void> {
    this.closed = true;
    await this.renewing?.catch(() => undefined);
    const slot = this.slot;
    if (slot) await slot.producer.disconnect();
  }

  private current(): Slot<R> {
    if (!this.slot || this.closed) throw new Error('The producer is not connected');
    return this.slot;
  }

  private async sendOn(slot: Slot<R>, record: R): Promise<unknown> {
    slot.inFlight++;
    try {
      return await slot.producer.send(record);
    } finally {
      slot.inFlight--;
      this.reap(slot);
    }
  }

  /** Replaces `failed` with a fresh producer, unless another send did so already. */
  private async renew(failed: Slot<R>, error: unknown): Promise<void> {
    if (this.slot !== failed) return this.renewing;
    this.renewing ??= (async () => {
      this.options.onRenew?.(error);
      const producer = this.options.create();
      await producer.connect();
      this.slot = { producer, inFlight: 0, retired: false };
      failed.retired = true;
      this.reap(failed);
    })().finally(() => {
      this.renewing = undefined;
    });
    return this.renewing;
  }

  private reap(slot: Slot<R>): void {
    if (slot.retired && slot.inFlight === 0) void slot.producer.disconnect().catch(() => undefined);
  }
}

/** Messages for one topic, as kafkajs's `sendBatch` takes them. */
export interface TopicMessages<M> {
  readonly topic: string;
  readonly messages: M[];
}

interface Waiting<M> {
  readonly topic: string;
  readonly messages: readonly M[];
  readonly resolve: () => void;
  readonly reject: (error: unknown) => void;
}

export interface BatchingSenderOptions {
  /** Most messages one produce request carries (default 500). */
  readonly maxMessages?: number;
  /** Produce requests in flight at once (default 1: an idempotent producer's order per partition). */
  readonly maxInFlight?: number;
  /**
   * One produce request per topic instead of one for all (default false), and at most one in
   * flight per topic (topics side by side up to maxInFlight): for topics that may vanish (reply
   * topics of requesters that stopped), whose failure must not fail the others. What a topic is
   * sent while its request is in flight goes together in its next one: under load, one request
   * carries many messages instead of each going alone (a produce request costs the sender and the
   * broker about as much for one message as for dozens).
   */
  readonly perTopic?: boolean;
}

/**
 * Gathers the sends of one turn of the event loop, across topics, into one produce request, and
 * whatever arrives while requests are in flight into the next one, in call order. A lone message
 * waits only for the current turn to end (no linger), while under load one round trip carries
 * many messages: the idempotent kafkajs producer has one request in flight per broker, so
 * without this every concurrent send would wait for all earlier acks.
 */
export class BatchingSender<M> {
  private readonly waiting = new Fifo<Waiting<M>>();
  private inFlight = 0;
  /** perTopic: the topics with a request in flight. */
  private readonly busyTopics = new Set<string>();
  private scheduled = false;
  private readonly maxMessages: number;
  private readonly maxInFlight: number;

  constructor(
    private readonly flush: (batch: TopicMessages<M>[]) => Promise<unknown>,
    private readonly options: BatchingSenderOptions = {},
  ) {
    this.maxMessages = options.maxMessages ?? 500;
    this.maxInFlight = options.maxInFlight ?? 1;
  }

  send(topic: string, messages: readonly M[]): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.waiting.push({ topic, messages, resolve, reject });
      if (this.scheduled || this.inFlight >= this.maxInFlight) return;
      this.scheduled = true;
      setImmediate(() => {
        this.scheduled = false;
        this.pump();
      });
    });
  }

  private pump(): void {
    if (this.options.perTopic) {
      this.pumpPerTopic();
      return;
    }
    while (this.inFlight < this.maxInFlight && this.waiting.length > 0) this.dispatch(this.take());
  }

  /**
   * perTopic: one batch for each topic that has none in flight, while there is room (maxInFlight),
   * each of whole sends in call order and at most maxMessages unless one send alone is larger;
   * the rest keeps its order and waits.
   */
  private pumpPerTopic(): void {
    if (this.inFlight >= this.maxInFlight || this.waiting.length === 0) return;
    const batches = new Map<string, { items: Waiting<M>[]; count: number }>();
    const held: Waiting<M>[] = [];
    const heldTopics = new Set<string>();
    while (this.waiting.length > 0) {
      const next = this.waiting.shift() as Waiting<M>;
      const batch = batches.get(next.topic);
      const fits = batch ? batch.count + next.messages.length <= this.maxMessages : this.inFlight + batches.size < this.maxInFlight;
      if (this.busyTopics.has(next.topic) || heldTopics.has(next.topic) || !fits) {
        // Once one send of a topic waits, every later one of it does: a topic's sends stay in order.
        heldTopics.add(next.topic);
        held.push(next);
      } else if (batch) {
        batch.items.push(next);
        batch.count += next.messages.length;
      } else {
        batches.set(next.topic, { items: [next], count: next.messages.length });
      }
    }
    for (const item of held) this.waiting.push(item);
    for (const [topic, { items }] of batches) this.dispatch(items, topic);
  }

  /** The next batch: whole sends in call order, at most maxMessages unless one send alone is larger. */
  private take(): Waiting<M>[] {
    const batch: Waiting<M>[] = [];
    let count = 0;
    while (this.waiting.length > 0 && (batch.length === 0 || count + (this.waiting.peek() as Waiting<M>).messages.length <= this.maxMessages)) {
      const next = this.waiting.shift() as Waiting<M>;
      batch.push(next);
      count += next.messages.length;
    }
    return batch;
  }

  private dispatch(items: Waiting<M>[], topic?: string): void {
    this.inFlight++;
    if (topic !== undefined) this.busyTopics.add(topic);
    let sending: Promise<unknown>;
    try {
      sending = Promise.resolve(this.flush(groupByTopic(items).map(({ topic, items: sends }) => ({ topic, messages: sends.flatMap((item) => item.messages) }))));
    } catch (error) {
      sending = Promise.reject(error);
    }
    sending
      .then(
        () => items.forEach((item) => item.resolve()),
        (error: unknown) => items.forEach((item) => item.reject(error)),
      )
      .finally(() => {
        this.inFlight--;
        if (topic !== undefined) this.busyTopics.delete(topic);
        this.pump();
      });
  }
}

/** Sends grouped by topic, topics in order of first appearance, sends in call order within each. */
function groupByTopic<M>(items: readonly Waiting<M>[]): Array<{ topic: string; items: Waiting<M>[] }> {
  const groups = new Map<string, Waiting<M>[]>();
  for (const item of items) {
    const group = groups.get(item.topic);
    if (group) group.push(item);
    else groups.set(item.topic, [item]);
  }
  return [...groups].map(([topic, grouped]) => ({ topic, items: grouped }));
}
