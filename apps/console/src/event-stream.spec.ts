import { EventStream, streamTypes, toStreamedEvent, type StreamedEvent, type StreamState } from './event-stream';

function streamOf(chunks: string[]): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  return new ReadableStream({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(encoder.encode(chunk));
      controller.close();
    },
  });
}

const frame = (id: string, type: string, data: Record<string, unknown>): string =>
  `id: ${id}\nevent: ${type}\ndata: ${JSON.stringify({ id, type, timestamp: '2026-11-26T00:00:00Z', data })}\n\n`;

describe('console event stream', () => {
  it('follows only the event types the token may read', () => {
    expect(streamTypes(['hits:read', 'missions:read'])).toEqual(['hit.created', 'hit.decided', 'hit.expired', 'mission.awaiting_approval', 'mission.completed']);
    expect(streamTypes(['hits:read', 'hits:approve'])).toEqual(['hit.created', 'hit.decided', 'hit.expired']);
    expect(streamTypes(['missions:read'])).toEqual(['mission.awaiting_approval', 'mission.completed']);
    expect(streamTypes([])).toEqual([]);
  });

  it('reads the event data of a server-sent event and ignores anything else', () => {
    expect(toStreamedEvent({ id: '7', event: 'hit.created', data: JSON.stringify({ data: { hitId: 'h' } }) })).toEqual({ id: '7', type: 'hit.created', data: { hitId: 'h' } });
    expect(toStreamedEvent({ id: undefined, event: 'hit.created', data: '{}' })).toBeUndefined();
    expect(toStreamedEvent({ id: '8', event: 'hit.created', data: 'not json' })).toBeUndefined();
  });

  it('resumes after a dropped connection from the last event it saw, and renews a refused token before trying again', async () => {
    const calls: Array<Record<string, string>> = [];
    const answers = [
      // The first connection delivers two events, the second split across chunks, then drops.
      () =>
        new Response(streamOf([frame('1', 'hit.created', { hitId: 'a' }), 'id: 2\nevent: hit.decided\nda', `ta: ${JSON.stringify({ data: { hitId: 'a' } })}\n\n`]), {
          status: 200,
        }),
      () => new Response('{}', { status: 401 }),
      () => new Response(streamOf([frame('3', 'hit.created', { hitId: 'b' })]), { status: 200 }),
    ];
    const events: StreamedEvent[] = [];
    const states: StreamState[] = [];
    const renewals: boolean[] = [];
    const lives: boolean[] = [];
    let stream: EventStream | undefined;
    const done = new Promise<void>((resolve) => {
      stream = new EventStream({
        url: 'http://gw.test/api/events',
        token: async (renew) => {
          renewals.push(renew);
          return renew ? 'fresh' : 'first';
        },
        onEvent: (event) => {
          events.push(event);
          if (event.id === '3') resolve();
        },
        onState: (state) => states.push(state),
        onLive: (resumed) => lives.push(resumed),
        wait: async () => undefined,
        fetch: (async (_url: string, init: RequestInit) => {
          calls.push({ ...(init.headers as Record<string, string>) });
          const answer = answers.shift();
          if (!answer) return new Promise(() => undefined);
          return answer();
        }) as unknown as typeof fetch,
      });
      stream.start();
    });
    await done;
    stream?.stop();
    expect(events.map((event) => [event.id, event.type])).toEqual([
      ['1', 'hit.created'],
      ['2', 'hit.decided'],
      ['3', 'hit.created'],
    ]);
    expect(calls.map((headers) => [headers.authorization, headers['last-event-id']])).toEqual([
      ['Bearer first', undefined],
      ['Bearer first', '2'],
      ['Bearer fresh', '2'],
    ]);
    expect(renewals).toEqual([false, false, true]);
    // The first connection asks the caller to read the current state; the resumed one does not.
    expect(lives).toEqual([false, true]);
    expect(states).toContain('live');
    expect(states).toContain('reconnecting');
    expect(states.at(-1)).toBe('stopped');
  });

  function scripted(answers: Array<() => Response>) {
    const calls: Array<Record<string, string>> = [];
    const waits: number[] = [];
    const renewals: boolean[] = [];
    const lives: boolean[] = [];
    let finished: () => void = () => undefined;
    const done = new Promise<void>((resolve) => (finished = resolve));
    const stream = new EventStream({
      url: 'http://gw.test/api/events',
      token: async (renew) => {
        renewals.push(renew);
        return 't';
      },
      onEvent: () => undefined,
      onState: () => undefined,
      onLive: (resumed) => lives.push(resumed),
      wait: async (ms) => {
        waits.push(ms);
      },
      fetch: (async (_url: string, init: RequestInit) => {
        calls.push({ ...(init.headers as Record<string, string>) });
        const answer = answers.shift();
        if (!answer) {
          finished();
          return new Promise(() => undefined);
        }
        return answer();
      }) as unknown as typeof fetch,
    });
    stream.start();
    return { calls, waits, renewals, lives, done: done.then(() => stream.stop()) };
  }

  it('starts afresh, and has the caller read the state again, when the gateway no longer keeps its resume point', async () => {
    const run = scripted([
      () => new Response(streamOf([frame('5', 'hit.created', { hitId: 'a' })]), { status: 200 }),
      () => new Response('{"code":"cursor_expired"}', { status: 400 }),
      () => new Response(streamOf([]), { status: 200 }),
    ]);
    await run.done;
    expect(run.calls.map((headers) => headers['last-event-id'])).toEqual([undefined, '5', undefined, undefined]);
    expect(run.lives).toEqual([false, false]);
  });

  it('renews a refused token at once only once, then waits longer after each refusal', async () => {
    const refused = () => new Response('{}', { status: 401 });
    const run = scripted([refused, refused, refused, refused]);
    await run.done;
    expect(run.renewals).toEqual([false, true, true, true, true]);
    expect(run.waits).toEqual([0, 1_000, 2_000, 4_000]);
  });
});
