/**
 * Concurrent handling of consumed messages, free of any client library so it is unit-tested
 * alone (the Kafka adapter feeds it fetched batches).
 *
 * - Messages without an order key (requests) run concurrently; messages with one (events, keyed
 *   `tenantId:aggregateId`) run one after another per key, keys concurrently.
 * - An InFlightLimit bounds the messages taken and not yet finished: once it is full, taking the
 *   next one waits, and with it the consumer's next fetch. That is the backpressure.
 * - Per partition, the position to commit is the lowest offset not yet finished, so a crash or an
 *   interruption redelivers every message that had not finished (and the finished ones behind
 *   it: consumers are idempotent). A message fetched again while it runs, or after it finished,
 *   is not taken twice.
 */

import { Fifo } from './fifo';

/** A FIFO counting semaphore: at most `max` holders at once, waiters served in arrival order. */
export class InFlightLimit {
  private active = 0;
  // A backlog can queue thousands of waiters: an array's shift would copy them all each time.
  private readonly waiting = new Fifo<() => void>();

  constructor(readonly max: number) {
    if (!Number.isInteger(max) || max < 1) throw new Error(`An in-flight limit must be a positive integer, got ${max}`);
  }

  /** Holders right now. */
  get inUse(): number {
    return this.active;
  }

  /** Callers waiting for a slot right now. */
  get queued(): number {
    return this.waiting.length;
  }

  acquire(): Promise<void> {
    if (this.active < this.max) {
      this.active++;
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => this.waiting.push(resolve));
  }

  /** Hands the slot straight to the next waiter, so nobody can overtake the queue. */
  release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.active--;
  }

  async run<T>(work: () => Promise<T>): Promise<T> {
    await this.acquire();
    try {
      return await work();
    } finally {
      this.release();
    }
  }
}

/** Default handlers in flight per process, across all its consumers (`BUS_MAX_IN_FLIGHT`). */
export const DEFAULT_MAX_IN_FLIGHT = 64;

type Progress = 'running' | 'done' | 'failed';

/**
 * What became of the messages of one partition that were taken since the last committed
 * position, in offset order (gaps allowed: only fetched offsets are listed).
 */
export class PartitionProgress {
  private readonly entries: Array<{ readonly offset: bigint; state: Progress }> = [];
  /** One past the last offset known finished with everything before it (set once something finished). */
  private next?: bigint;

  /** Whether to handle `offset` now: not while it runs, nor once it is done; again after it failed. */
  begin(offset: bigint): boolean {
    if (this.next !== undefined && offset < this.next) return false;
    const index = this.indexOf(offset);
    if (index >= 0) {
      if (this.entries[index].state !== 'failed') return false;
      this.entries[index].state = 'running';
      return true;
    }
    const at = this.entries.findIndex((entry) => entry.offset > offset);
    this.entries.splice(at < 0 ? this.entries.length : at, 0, { offset, state: 'running' });
    return true;
  }

  finish(offset: bigint): void {
    this.set(offset, 'done');
    while (this.entries.length > 0 && this.entries[0].state === 'done') {
      this.next = (this.entries.shift() as { offset: bigint }).offset + 1n;
    }
  }

  /** Not finished: the committed position will not pass it until it is taken again and finishes. */
  fail(offset: bigint): void {
    this.set(offset, 'failed');
  }

  /** The offset to commit (the next one to read after a restart), or undefined while nothing finished. */
  position(): bigint | undefined {
    return this.entries.length > 0 ? this.entries[0].offset : this.next;
  }

  /** Messages taken and not finished (running or failed). */
  get open(): number {
    return this.entries.filter((entry) => entry.state !== 'done').length;
  }

  /** The lowest failed offset, where reading resumes after a failure. */
  firstFailed(): bigint | undefined {
    return this.entries.find((entry) => entry.state === 'failed')?.offset;
  }

  private indexOf(offset: bigint): number {
    return this.entries.findIndex((entry) => entry.offset === offset);
  }

  private set(offset: bigint, state: Progress): void {
    const index = this.indexOf(offset);
    if (index >= 0) this.entries[index].state = state;
  }
}

/** A consumed message, as the dispatcher needs to know it. */
export interface Dispatchable {
  readonly topic: string;
  readonly partition: number;
  readonly offset: string;
}

export interface CommitPosition {
  readonly topic: string;
  readonly partition: number;
  readonly offset: string;
}

export interface DispatcherOptions<M extends Dispatchable> {
  /** Handlers running at once. */
  readonly limit: InFlightLimit;
  /**
   * Messages taken and not finished (running, or queued behind their key): taking waits once it
   * is full, and with it the consumer's next fetch. Larger than `limit`, so that one key with a
   * queue of events does not hold every running slot while other keys could run.
   */
  readonly taken: InFlightLimit;
  /** Messages that share a key run in offset order, one at a time; undefined: no order among them. */
  readonly orderKey?: (message: M) => string;
  readonly handle: (message: M) => Promise<void>;
  /** Whether a failure means "leave it for redelivery" (the bus is closing) rather than "read it again". */
  readonly isInterruption: (error: unknown) => boolean;
  /** Commits positions (the next offset to read per partition); a failure is retried. */
  readonly commit: (positions: CommitPosition[]) => Promise<void>;
  /** A handler failed on this partition: reading must resume at its lowest failed offset (firstFailed()). */
  readonly rewind: (topic: string, partition: number) => void;
  readonly onCommitError?: (error: unknown) => void;
  /** Delay before a failed commit is tried again (default 1 s). */
  readonly commitRetryMs?: number;
  /**
   * Least time between two commits (default 0): a commit shares the consumer's connection with
   * its fetches, so committing after every message would hold up the next fetch each time.
   */
  readonly commitIntervalMs?: number;
}

interface KeyQueue<M> {
  readonly waiting: M[];
  busy: boolean;
  /**
   * Set when a message of the key failed: until that offset is read again, later messages of the
   * key are not run (they fail too, and are read again after it), so none overtakes it.
   */
  blockedAt?: bigint;
  /** The partition of the blocking message (`topic\u0000partition`). */
  blockedIn?: string;
}

/**
 * Takes the messages of one consumer group in this process and runs them as described at the
 * top of this file, committing as they finish: one commit in flight, the next one carrying every
 * position that moved meanwhile.
 */
export class Dispatcher<M extends Dispatchable> {
  private readonly progress = new Map<string, { topic: string; partition: number; progress: PartitionProgress }>();
  private readonly keys = new Map<string, KeyQueue<M>>();
  /** The partitions the group assigned this member at its last join; undefined until known. */
  private assigned?: ReadonlySet<string>;
  private readonly dirty = new Set<string>();
  private readonly running = new Set<Promise<void>>();
  private committing?: Promise<void>;
  private commitTimer?: NodeJS.Timeout;
  private lastCommitAt = Number.NEGATIVE_INFINITY;

  constructor(private readonly options: DispatcherOptions<M>) {}

  /** Messages taken and not yet finished. */
  get inFlight(): number {
    let open = 0;
    for (const { progress } of this.progress.values()) open += progress.open;
    return open;
  }

  /**
   * Takes `message` unless it runs or finished already: waits for room under the limit, then
   * starts it (after the earlier messages of its key). Resolves once it is taken, not handled.
   */
  async take(message: M): Promise<void> {
    const tracked = this.partitionOf(message);
    const offset = BigInt(message.offset);
    if (!tracked.begin(offset)) return;
    await this.options.taken.acquire();
    const orderKey = this.options.orderKey?.(message);
    if (orderKey === undefined) {
      void this.start(message, tracked);
      return;
    }
    // Kafka orders a key within its partition: so does the queue.
    const key = `${message.topic}\u0000${message.partition}\u0000${orderKey}`;
    const queue = this.keys.get(key) ?? { waiting: [], busy: false };
    this.keys.set(key, queue);
    if (queue.blockedAt !== undefined) {
      if (offset > queue.blockedAt) {
        tracked.fail(offset);
        this.options.taken.release();
        return;
      }
      queue.blockedAt = undefined;
      queue.blockedIn = undefined;
    }
    queue.waiting.push(message);
    if (!queue.busy) this.pumpKey(key, queue);
  }

  /**
   * The group assigned this member `partitions` (`topic\u0000partition`). Messages of other
   * partitions that wait behind their key do not run (they are marked failed, so that if a
   * partition comes back they are read again), their keys are no longer blocked, and a handler
   * of theirs that fails later neither blocks nor rewinds: the partition is its new member's.
   * Progress is kept: a message still running, or done, is not taken twice if it comes back.
   */
  retain(partitions: ReadonlySet<string>): void {
    this.assigned = partitions;
    for (const [key, queue] of this.keys) {
      const lost = queue.waiting.filter((message) => !this.owns(message));
      if (lost.length > 0) {
        queue.waiting.splice(0, queue.waiting.length, ...queue.waiting.filter((message) => this.owns(message)));
        for (const message of lost) {
          this.partitionOf(message).fail(BigInt(message.offset));
          this.options.taken.release();
        }
      }
      if (queue.blockedIn !== undefined && !partitions.has(queue.blockedIn)) {
        queue.blockedAt = undefined;
        queue.blockedIn = undefined;
      }
      if (!queue.busy && queue.waiting.length === 0 && queue.blockedAt === undefined) this.keys.delete(key);
    }
  }

  /** Whether the message's partition is this member's (always, until an assignment is known). */
  private owns(message: Dispatchable): boolean {
    return this.assigned === undefined || this.assigned.has(`${message.topic}\u0000${message.partition}`);
  }

  /** The lowest offset of the partition whose handling failed (where reading must resume), if any. */
  firstFailed(topic: string, partition: number): string | undefined {
    return this.progress.get(`${topic}\u0000${partition}`)?.progress.firstFailed()?.toString();
  }

  /** Resolves once nothing taken is still running, then commits what finished. */
  async drain(): Promise<void> {
    while (this.running.size > 0 || [...this.keys.values()].some((queue) => queue.busy)) await Promise.allSettled([...this.running]);
    await this.commitNow();
  }

  private partitionOf(message: M): PartitionProgress {
    const id = `${message.topic}\u0000${message.partition}`;
    let tracked = this.progress.get(id);
    if (!tracked) {
      tracked = { topic: message.topic, partition: message.partition, progress: new PartitionProgress() };
      this.progress.set(id, tracked);
    }
    return tracked.progress;
  }

  private pumpKey(key: string, queue: KeyQueue<M>): void {
    const message = queue.waiting.shift();
    if (!message) {
      queue.busy = false;
      if (queue.blockedAt === undefined) this.keys.delete(key);
      return;
    }
    queue.busy = true;
    const run = this.start(message, this.partitionOf(message));
    void run.then((ok) => {
      if (!ok && this.owns(message)) {
        // Its successors must not overtake it: they fail with it and are read again after it.
        queue.blockedAt = BigInt(message.offset);
        queue.blockedIn = `${message.topic}\u0000${message.partition}`;
        for (const later of queue.waiting.splice(0)) {
          this.partitionOf(later).fail(BigInt(later.offset));
          this.options.taken.release();
        }
      }
      this.pumpKey(key, queue);
    });
  }

  /** Runs one taken message once a running slot is free; resolves whether it finished. */
  private start(message: M, tracked: PartitionProgress): Promise<boolean> {
    const offset = BigInt(message.offset);
    const run = (async (): Promise<boolean> => {
      try {
        await this.options.limit.run(() => this.options.handle(message));
        tracked.finish(offset);
        this.markDirty(message);
        return true;
      } catch (error) {
        tracked.fail(offset);
        if (!this.options.isInterruption(error) && this.owns(message)) this.options.rewind(message.topic, message.partition);
        return false;
      } finally {
        this.options.taken.release();
      }
    })();
    const settled = run.then(() => undefined);
    this.running.add(settled);
    void settled.finally(() => this.running.delete(settled));
    return run;
  }

  private markDirty(message: M): void {
    this.dirty.add(`${message.topic}\u0000${message.partition}`);
    this.scheduleCommit(0);
  }

  /** A commit now, or once the commit interval (or `atLeastMs`) has passed; never two at once. */
  private scheduleCommit(atLeastMs: number): void {
    if (this.committing || this.commitTimer || this.dirty.size === 0) return;
    const delay = Math.max(atLeastMs, this.lastCommitAt + (this.options.commitIntervalMs ?? 0) - Date.now());
    if (delay <= 0) {
      this.committing = this.commit();
      return;
    }
    this.commitTimer = setTimeout(() => {
      this.commitTimer = undefined;
      if (!this.committing) this.committing = this.commit();
    }, delay);
    this.commitTimer.unref();
  }

  /** Commits every position that moved; then schedules the next commit if more moved meanwhile. */
  private async commit(): Promise<void> {
    const positions = this.takeDirty();
    let retryInMs = 0;
    try {
      if (positions.length > 0) await this.options.commit(positions);
    } catch (error) {
      this.options.onCommitError?.(error);
      for (const { topic, partition } of positions) this.dirty.add(`${topic}\u0000${partition}`);
      retryInMs = this.options.commitRetryMs ?? 1_000;
    } finally {
      this.lastCommitAt = Date.now();
      this.committing = undefined;
    }
    this.scheduleCommit(retryInMs);
  }

  private takeDirty(): CommitPosition[] {
    const positions: CommitPosition[] = [];
    for (const id of this.dirty) {
      const tracked = this.progress.get(id);
      const position = tracked?.progress.position();
      if (tracked && position !== undefined) positions.push({ topic: tracked.topic, partition: tracked.partition, offset: position.toString() });
    }
    this.dirty.clear();
    return positions;
  }

  /**
   * Waits for a commit under way, then commits what is left at once. A failure is reported, not
   * thrown: closing goes on, and what was not committed is read again (idempotent consumers).
   */
  private async commitNow(): Promise<void> {
    await this.committing;
    if (this.commitTimer) {
      clearTimeout(this.commitTimer);
      this.commitTimer = undefined;
    }
    const positions = this.takeDirty();
    try {
      if (positions.length > 0) await this.options.commit(positions);
    } catch (error) {
      this.options.onCommitError?.(error);
    }
  }
}
