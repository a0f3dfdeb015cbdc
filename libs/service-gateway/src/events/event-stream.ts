import { eventIdPosition, type TenantEvent, type TenantEventPage, type TenantEventType } from '@mission/contracts';

/** Events asked of the log at once while a stream catches up. */
export const CATCH_UP_PAGE = 500;

/** What a stream sends: these types, of this mission when one is named. */
export interface StreamFilter {
  readonly types: ReadonlySet<TenantEventType>;
  readonly missionId?: string;
}

/** Reads the tenant's log: the events of the filter after an event id (none: from the start), at most `limit`; `limit` 0 reads only `latest`. */
export type LogReader = (after: string | undefined, limit: number) => Promise<TenantEventPage>;

function positionOf(id: string): bigint {
  const position = eventIdPosition(id);
  if (position === undefined) throw new Error(`Not an event id: ${id.slice(0, 64)}`);
  return BigInt(position);
}

/**
 * One client's view of its tenant's log: what it has been sent, up to which event of the log it is
 * up to date (every type counts, sent or filtered out), and how to bring it up to date. Live events
 * come from the feed in the log's order as a rule; one the stream is already past is dropped, and
 * one beyond the next position means the feed missed some, which are read from the log. Work is
 * done one step at a time, so what is sent follows the log's order, with no gap and no repeat.
 */
export class EventStreamCursor {
  /** The last event of the log the client is up to date with (id and position); none: the log was empty. */
  private seen: { id: string; position: bigint } | undefined;
  private queue: Promise<void> = Promise.resolve();

  constructor(
    private readonly read: LogReader,
    private readonly filter: StreamFilter,
    private readonly send: (event: TenantEvent) => void,
    /** A live step failed (the log could not be read): the stream ends, and the client resumes from what it got. */
    private readonly fail: (error: unknown) => void,
    /** Awaited before each further page of a catch-up: the client takes what was sent before more is read. */
    private readonly pace: () => Promise<void> = async () => undefined,
  ) {}

  /** The first page did not reach the log's end: the rest is read once the stream is open (resume). */
  private more = false;

  /**
   * Starts after `lastEventId` (sending the first page of later events of the filter now; the
   * rest follows `resume`), or with what comes next when there is none. Fails (cursor_expired,
   * from the log) before anything is sent when the log never issued that id or no longer holds
   * what follows it.
   */
  start(lastEventId: string | undefined): Promise<void> {
    const started = this.queue.then(() => this.begin(lastEventId));
    this.queue = started.catch(() => undefined);
    return started;
  }

  /** Once the stream is open: the rest of a catch-up that did not fit the first page. */
  resume(): Promise<void> {
    return this.step(async () => {
      if (!this.more) return;
      this.more = false;
      await this.catchUp();
    });
  }

  /** A live event of the tenant (any type), in turn after whatever the stream is doing. */
  offer(event: TenantEvent): Promise<void> {
    return this.step(() => this.onLive(event));
  }

  /** Reads the log for anything after what the client has seen (the feed may have missed events). */
  reconcile(): Promise<void> {
    return this.step(async () => {
      const { latest } = await this.read(undefined, 0);
      if (latest && positionOf(latest) > (this.seen?.position ?? 0n)) await this.catchUp();
    });
  }

  private step(work: () => Promise<void>): Promise<void> {
    this.queue = this.queue.then(work).catch((error: unknown) => this.fail(error));
    return this.queue;
  }

  private async begin(lastEventId: string | undefined): Promise<void> {
    if (lastEventId === undefined) {
      const { latest } = await this.read(undefined, 0);
      this.seen = latest ? { id: latest, position: positionOf(latest) } : undefined;
      return;
    }
    const first = await this.read(lastEventId, CATCH_UP_PAGE);
    this.seen = { id: lastEventId, position: positionOf(lastEventId) };
    this.more = !this.takePage(first);
  }

  private async onLive(event: TenantEvent): Promise<void> {
    const position = positionOf(event.id);
    const last = this.seen?.position ?? 0n;
    if (position <= last) return;
    if (position === last + 1n) {
      if (this.matches(event)) this.send(event);
      this.seen = { id: event.id, position };
      return;
    }
    await this.catchUp();
  }

  /** Sends every event of the filter after what the client has seen, up to the log's newest. */
  private async catchUp(): Promise<void> {
    await this.take(await this.read(this.seen?.id, CATCH_UP_PAGE));
  }

  private async take(page: TenantEventPage): Promise<void> {
    let current = page;
    while (!this.takePage(current)) {
      await this.pace();
      current = await this.read(this.seen?.id, CATCH_UP_PAGE);
    }
  }

  /** Sends a page's events; true when it reached the log's end (no further page to read). */
  private takePage(page: TenantEventPage): boolean {
    for (const event of page.items) {
      this.send(event);
      this.seen = { id: event.id, position: positionOf(event.id) };
    }
    if (page.items.length >= CATCH_UP_PAGE) return false;
    // The whole rest of the log was read (the page was read after `latest`, so it holds every event
    // of the filter up to it): events of other types up to the newest count as seen.
    if (page.latest && positionOf(page.latest) > (this.seen?.position ?? 0n)) this.seen = { id: page.latest, position: positionOf(page.latest) };
    return true;
  }

  private matches(event: TenantEvent): boolean {
    return this.filter.types.has(event.type) && (this.filter.missionId === undefined || event.data.missionId === this.filter.missionId);
  }
}
