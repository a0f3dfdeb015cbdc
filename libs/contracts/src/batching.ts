import { AsyncResource } from 'node:async_hooks';

/**
 * Gathers what is asked for during one turn of the event loop (every socket that was ready has
 * been read by then) and hands it on in batches of at most `maxPerBatch`, from setImmediate: one
 * round trip per batch to a database or Redis instead of one per request, and at low load no wait
 * beyond the current turn. Batches are handed on in the context the batcher was made in (at
 * start-up: no tenant, no trace), not in that of whichever request happened to come first,
 * unless `firstCallerContext` asks for that (the batch is then traced under that request).
 */
export class TurnBatcher<T> {
  private queued: T[] = [];
  private scheduled = false;
  private readonly context = new AsyncResource('TurnBatcher');

  constructor(
    private readonly maxPerBatch: number,
    private readonly send: (batch: T[]) => void,
    private readonly options: { readonly firstCallerContext?: boolean } = {},
  ) {
    if (!Number.isInteger(maxPerBatch) || maxPerBatch < 1) throw new RangeError(`maxPerBatch must be a positive integer, got ${maxPerBatch}`);
  }

  add(item: T): void {
    this.queued.push(item);
    if (this.scheduled) return;
    this.scheduled = true;
    if (this.options.firstCallerContext) setImmediate(() => this.flush());
    else setImmediate(() => this.context.runInAsyncScope(() => this.flush()));
  }

  private flush(): void {
    this.scheduled = false;
    const queued = this.queued;
    this.queued = [];
    for (let start = 0; start < queued.length; start += this.maxPerBatch) this.send(queued.slice(start, start + this.maxPerBatch));
  }
}
