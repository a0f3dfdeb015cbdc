import fc from 'fast-check';
import { DomainError, eventIdPosition, formatEventId, cursorExpired, type TenantEvent, type TenantEventPage, type TenantEventType } from '@mission/contracts';
import { CATCH_UP_PAGE, EventStreamCursor, type LogReader, type StreamFilter } from './event-stream';

const TYPES: TenantEventType[] = ['mission.completed', 'hit.created', 'hit.decided'];
const MISSIONS = ['00000000-0000-4000-8000-000000000001', '00000000-0000-4000-8000-000000000002'];

/** A tenant's log in memory, read the way notification-service answers `notify.events.list`. */
class FakeLog {
  readonly events: TenantEvent[] = [];
  reads = 0;

  append(type: TenantEventType, missionId: string): TenantEvent {
    const position = this.events.length + 1;
    const event: TenantEvent = { id: formatEventId(position, position.toString(16).padStart(12, '0')), type, timestamp: new Date(0).toISOString(), data: { missionId } };
    this.events.push(event);
    return event;
  }

  reader(filter: StreamFilter): LogReader {
    return async (after, limit) => {
      this.reads++;
      await Promise.resolve();
      const latest = this.events.at(-1)?.id ?? null;
      let from = 0;
      if (after !== undefined) {
        const position = Number(eventIdPosition(after) ?? NaN);
        if (!(position >= 1 && position <= this.events.length) || this.events[position - 1]?.id !== after) throw cursorExpired(after);
        from = position;
      }
      const items = this.events
        .slice(from)
        .filter((event) => filter.types.has(event.type) && (filter.missionId === undefined || event.data.missionId === filter.missionId))
        .slice(0, limit);
      return { items, latest } satisfies TenantEventPage;
    };
  }
}

function cursorOver(log: FakeLog, filter: StreamFilter): { cursor: EventStreamCursor; sent: TenantEvent[]; failures: unknown[] } {
  const sent: TenantEvent[] = [];
  const failures: unknown[] = [];
  const cursor = new EventStreamCursor(
    log.reader(filter),
    filter,
    (event) => sent.push(event),
    (error) => failures.push(error),
  );
  return { cursor, sent, failures };
}

describe('EventStreamCursor', () => {
  const all: StreamFilter = { types: new Set(TYPES) };

  it('without Last-Event-ID starts with what comes next', async () => {
    const log = new FakeLog();
    log.append('hit.created', MISSIONS[0] as string);
    const { cursor, sent } = cursorOver(log, all);
    await cursor.start(undefined);
    const next = log.append('hit.decided', MISSIONS[0] as string);
    await cursor.offer(next);
    expect(sent).toEqual([next]);
  });

  it('with Last-Event-ID sends every later event first, across pages, then live ones', async () => {
    const log = new FakeLog();
    for (let index = 0; index < CATCH_UP_PAGE + 20; index++) log.append(TYPES[index % 3] as TenantEventType, MISSIONS[0] as string);
    const { cursor, sent } = cursorOver(log, all);
    await cursor.start(log.events[9]?.id);
    // The first page before the stream opens; the rest once it is open.
    expect(sent).toEqual(log.events.slice(10, 10 + CATCH_UP_PAGE));
    await cursor.resume();
    expect(sent).toEqual(log.events.slice(10));
    const live = log.append('mission.completed', MISSIONS[1] as string);
    await cursor.offer(live);
    expect(sent.at(-1)).toEqual(live);
  });

  it('refuses an id the log never issued before sending anything', async () => {
    const log = new FakeLog();
    log.append('hit.created', MISSIONS[0] as string);
    const { cursor, sent } = cursorOver(log, all);
    await expect(cursor.start(formatEventId(1, 'ffffffffffff'))).rejects.toBeInstanceOf(DomainError);
    expect(sent).toEqual([]);
  });

  it('ends the stream when a live step cannot read the log', async () => {
    const log = new FakeLog();
    const failures: unknown[] = [];
    let broken = false;
    const reader = log.reader(all);
    const cursor = new EventStreamCursor(
      (after, limit) => (broken ? Promise.reject(new Error('notification-service unavailable')) : reader(after, limit)),
      all,
      () => undefined,
      (error) => failures.push(error),
    );
    await cursor.start(undefined);
    broken = true;
    log.append('hit.created', MISSIONS[0] as string);
    await cursor.offer(log.append('hit.created', MISSIONS[0] as string));
    expect(failures).toHaveLength(1);
  });

  it('sends the filtered log once, in order, however the feed drops, repeats or reorders live events', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ type: fc.constantFrom(...TYPES), mission: fc.constantFrom(...MISSIONS) }), { minLength: 1, maxLength: 40 }),
        fc.array(fc.constantFrom('deliver', 'drop', 'repeat', 'swap'), { minLength: 40, maxLength: 40 }),
        fc.nat({ max: 40 }),
        fc.subarray(TYPES, { minLength: 1 }),
        fc.option(fc.constantFrom(...MISSIONS), { nil: undefined }),
        fc.boolean(),
        async (appends, fates, resumeAt, types, missionId, reconcileAtEnd) => {
          const log = new FakeLog();
          const filter: StreamFilter = { types: new Set(types), missionId };
          const before = Math.min(resumeAt, appends.length);
          for (const { type, mission } of appends.slice(0, before)) log.append(type, mission);
          const { cursor, sent, failures } = cursorOver(log, filter);
          const resumeFrom = before > 0 ? log.events[before - 1]?.id : undefined;
          await cursor.start(resumeFrom);
          // The feed, as events are recorded: each delivered, dropped, delivered twice, or held back
          // and delivered after the next one; offers are not awaited, so reads and appends interleave.
          const offers: Array<Promise<void>> = [];
          let heldBack: TenantEvent | undefined;
          let lastOffered: TenantEvent | undefined;
          const offer = (event: TenantEvent): void => {
            offers.push(cursor.offer(event));
            lastOffered = event;
          };
          appends.slice(before).forEach(({ type, mission }, index) => {
            const event = log.append(type, mission);
            const fate = fates[index % fates.length];
            if (fate === 'swap' && heldBack === undefined) {
              heldBack = event;
              return;
            }
            if (fate !== 'drop') offer(event);
            if (fate === 'repeat') offer(event);
            if (heldBack) offer(heldBack);
            heldBack = undefined;
          });
          if (heldBack) offer(heldBack);
          await Promise.all(offers);
          // A dropped last event is found by the periodic check of the log.
          if (reconcileAtEnd || lastOffered?.id !== log.events.at(-1)?.id) await cursor.reconcile();
          const expected = log.events.slice(before).filter((event) => filter.types.has(event.type) && (missionId === undefined || event.data.missionId === missionId));
          // With Last-Event-ID: everything after it; without (nothing recorded before the start): every live event.
          expect(sent).toEqual(expected);
          expect(failures).toEqual([]);
        },
      ),
      { numRuns: 300 },
    );
  });
});
