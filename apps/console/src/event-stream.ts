import { createParser, type EventSourceMessage } from 'eventsource-parser';

/*
 * The tenant's events from `GET /api/events`, read with fetch (EventSource cannot send the bearer
 * token) and parsed by eventsource-parser. After a dropped connection it reconnects with
 * `Last-Event-ID`, so the gateway sends what was missed, once; after a refused token it asks for a
 * fresh one first.
 */

export interface StreamedEvent {
  readonly id: string;
  readonly type: string;
  readonly data: Readonly<Record<string, unknown>>;
}

const HIT_EVENTS = ['hit.created', 'hit.decided', 'hit.expired'];
const MISSION_EVENTS = ['mission.awaiting_approval', 'mission.completed'];

/** The event types the console follows that a token may read (the stream refuses a type whose scope the token lacks). */
export function streamTypes(scopes: readonly string[]): string[] {
  return [...(scopes.includes('hits:read') ? HIT_EVENTS : []), ...(scopes.includes('missions:read') ? MISSION_EVENTS : [])];
}

export type StreamState = 'connecting' | 'live' | 'reconnecting' | 'stopped';

export interface EventStreamOptions {
  readonly url: string;
  /** The current access token; `renew` is set after the gateway refused the last one. */
  readonly token: (renew: boolean) => Promise<string>;
  readonly onEvent: (event: StreamedEvent) => void;
  readonly onState: (state: StreamState, detail?: string) => void;
  /**
   * Each time a connection is up: `resumed` when the gateway continues from the last event seen
   * (it sends what was missed), otherwise the caller reads the current state again, because
   * nothing before this moment will come on the stream (the first connection, or a resume point
   * the gateway no longer keeps).
   */
  readonly onLive?: (resumed: boolean) => void;
  /** How to wait before the next try (tests). */
  readonly wait?: (ms: number) => Promise<void>;
  readonly fetch?: typeof fetch;
  /** Waits before reconnecting: 1 s, doubling up to this (ms). */
  readonly maxBackoffMs?: number;
}

/** The parsed event, or undefined for one whose data is not an event of the log. */
export function toStreamedEvent(message: Pick<EventSourceMessage, 'id' | 'event' | 'data'>): StreamedEvent | undefined {
  if (!message.id || !message.event) return undefined;
  try {
    const parsed = JSON.parse(message.data) as { data?: unknown };
    const data = parsed && typeof parsed.data === 'object' && parsed.data !== null ? (parsed.data as Record<string, unknown>) : {};
    return { id: message.id, type: message.event, data };
  } catch {
    return undefined;
  }
}

export class EventStream {
  private lastEventId: string | undefined;
  private controller: AbortController | undefined;
  private stopped = false;
  private readonly fetcher: typeof fetch;

  constructor(private readonly options: EventStreamOptions) {
    this.fetcher = options.fetch ?? fetch.bind(globalThis);
  }

  start(): void {
    void this.run();
  }

  stop(): void {
    this.stopped = true;
    this.controller?.abort();
    this.options.onState('stopped');
  }

  private async run(): Promise<void> {
    let backoff = 1_000;
    let renew = false;
    const wait = this.options.wait ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
    this.options.onState('connecting');
    while (!this.stopped) {
      this.controller = new AbortController();
      let delay = backoff;
      try {
        const renewed = renew;
        renew = false;
        const resumeFrom = this.lastEventId;
        const headers: Record<string, string> = { accept: 'text/event-stream', authorization: `Bearer ${await this.options.token(renewed)}` };
        if (resumeFrom) headers['last-event-id'] = resumeFrom;
        const response = await this.fetcher(this.options.url, { headers, signal: this.controller.signal, cache: 'no-store' });
        if (response.ok && response.body) {
          this.options.onState('live');
          backoff = 1_000;
          this.options.onLive?.(resumeFrom !== undefined);
          // Dropped or closed: back in a second, from the last event seen.
          await this.read(response.body);
        } else if (response.status === 401) {
          // A refused token is renewed at once, once; refused again, it waits like any failure.
          renew = true;
          if (!renewed) delay = 0;
          this.options.onState('reconnecting', 'the token was refused');
        } else if (response.status === 400 && resumeFrom) {
          // The resume point is older than the log keeps: start afresh (onLive tells the caller to reload).
          this.lastEventId = undefined;
          delay = 0;
          this.options.onState('reconnecting', 'the events since the last one seen are no longer kept');
        } else {
          this.options.onState('reconnecting', `the event stream answered ${response.status}`);
        }
      } catch (error) {
        if (this.stopped) return;
        this.options.onState('reconnecting', error instanceof Error ? error.message : String(error));
      }
      if (this.stopped) return;
      this.options.onState('reconnecting');
      await wait(delay);
      if (delay > 0) backoff = Math.min(backoff * 2, this.options.maxBackoffMs ?? 15_000);
    }
  }

  private async read(body: ReadableStream<Uint8Array>): Promise<void> {
    const parser = createParser({
      onEvent: (message) => {
        const event = toStreamedEvent(message);
        if (!event) return;
        this.lastEventId = event.id;
        this.options.onEvent(event);
      },
    });
    const reader = body.getReader();
    const decoder = new TextDecoder();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      parser.feed(decoder.decode(value, { stream: true }));
    }
  }
}
