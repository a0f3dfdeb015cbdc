/** One server-sent event as a client parses it (WHATWG HTML, "Server-sent events"). */
export interface ReceivedEvent {
  readonly id: string;
  readonly event: string;
  readonly data: any;
}

export interface OpenStream {
  readonly status: number;
  readonly headers: Headers;
  /** The body of a refusal (problem details) when the stream was not opened; undefined when it was. */
  readonly body: any;
  /** Every event received so far, in order. */
  readonly events: ReceivedEvent[];
  /** Comment lines received so far (heartbeats). */
  readonly comments: string[];
  /** Waits until `predicate` holds for the events received (or throws after `timeoutMs`). */
  waitFor(predicate: (events: readonly ReceivedEvent[]) => boolean, timeoutMs?: number): Promise<ReceivedEvent[]>;
  /** Whether the server ended the stream. */
  readonly ended: () => boolean;
  close(): void;
}

/**
 * Opens `GET <path>` as an event stream, as an EventSource would (Accept: text/event-stream,
 * Last-Event-ID when resuming), and parses what arrives. A refusal is returned with its body.
 */
export async function openEventStream(baseUrl: string, path: string, options: { token: string; lastEventId?: string; headers?: Record<string, string> }): Promise<OpenStream> {
  const controller = new AbortController();
  const response = await fetch(`${baseUrl}${path}`, {
    headers: {
      authorization: `Bearer ${options.token}`,
      accept: 'text/event-stream',
      ...(options.lastEventId === undefined ? {} : { 'last-event-id': options.lastEventId }),
      ...options.headers,
    },
    signal: controller.signal,
  });
  const events: ReceivedEvent[] = [];
  const comments: string[] = [];
  let ended = false;
  if (response.status !== 200 || !response.body) {
    const text = await response.text();
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {
      // not JSON: kept as text
    }
    return { status: response.status, headers: response.headers, body, events, comments, waitFor: async () => events, ended: () => true, close: () => undefined };
  }
  const waiters = new Set<() => void>();
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  void (async () => {
    let buffer = '';
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let boundary: number;
        while ((boundary = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, boundary);
          buffer = buffer.slice(boundary + 2);
          const fields: Record<string, string> = {};
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) comments.push(line.slice(1).trim());
            const colon = line.indexOf(':');
            if (colon <= 0) continue;
            const name = line.slice(0, colon);
            const value = line.slice(colon + 1).replace(/^ /, '');
            fields[name] = name in fields ? `${fields[name]}\n${value}` : value;
          }
          if (fields.data !== undefined) events.push({ id: fields.id ?? '', event: fields.event ?? 'message', data: JSON.parse(fields.data) });
          for (const wake of waiters) wake();
        }
      }
    } catch {
      // aborted by close()
    } finally {
      ended = true;
      for (const wake of waiters) wake();
    }
  })();
  return {
    status: response.status,
    headers: response.headers,
    body: undefined,
    events,
    comments,
    ended: () => ended,
    waitFor: (predicate, timeoutMs = 15_000) =>
      new Promise((resolve, reject) => {
        const check = (): void => {
          if (predicate(events)) {
            clearTimeout(timer);
            waiters.delete(check);
            resolve([...events]);
          } else if (ended) {
            clearTimeout(timer);
            waiters.delete(check);
            reject(new Error(`The stream ended; received ${JSON.stringify(events.map((e) => e.event))}`));
          }
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`Timed out; received ${JSON.stringify(events.map((e) => e.event))}`));
        }, timeoutMs);
        waiters.add(check);
        check();
      }),
    close: () => controller.abort(),
  };
}
