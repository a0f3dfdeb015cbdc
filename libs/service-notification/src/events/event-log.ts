import { AsyncResource } from 'node:async_hooks';
import { randomBytes } from 'node:crypto';
import { DataSource, EntityManager } from 'typeorm';
import {
  cursorExpired,
  eventIdPosition,
  formatEventId,
  MessageTypes,
  Topics,
  type ListTenantEvents,
  type TenantEvent,
  type TenantEventPage,
  type TenantEventType,
} from '@mission/contracts';
import { deferWrite, enqueueOutbox, queryInOneTrip, RecordCipher, tenantTransaction } from '@mission/persistence';
import { currentTenant, runWithTenant, traceHeaders } from '@mission/tenant-context';
import type { LoggedEvent } from './public-events';

export const NOTIFY_SCHEMA = 'notify';

/** How long the log keeps an event (the contract promises 7 days at least). */
export const EVENT_RETENTION_DAYS = 8;

/** The unique (tenant_id, source_message_id) of notify.events, as PostgreSQL named it. */
const SOURCE_MESSAGE_CONSTRAINT = 'events_tenant_id_source_message_id_key';

function isUniqueViolation(error: unknown, constraint: string): boolean {
  const driverError = (error as { driverError?: { code?: unknown; constraint?: unknown } } | null)?.driverError;
  return driverError?.code === '23505' && driverError.constraint === constraint;
}

/** Events of one tenant recorded in one transaction at most (more wait for the next). */
export const RECORD_BATCH_EVENTS = 100;

/** An event waiting for its tenant's recording, with the trace it came with and its caller's promise. */
interface Waiting {
  readonly sourceMessageId: string;
  readonly event: LoggedEvent;
  readonly trace: Record<string, string>;
  readonly resolve: (recorded: TenantEvent | undefined) => void;
  readonly reject: (error: unknown) => void;
}

interface StoredEvent {
  position: string;
  nonce: string;
  type: TenantEventType;
  data: string;
  occurred_at: Date;
}

/**
 * The current tenant's event log: every event a client may be told about, numbered in the order it
 * was recorded, 1, 2, 3, … with no gap, kept EVENT_RETENTION_DAYS. A page after a position holds
 * every event recorded after it, so a reader that resumes from the last event it saw misses none
 * and sees none twice.
 */
export class EventLog {
  /** Per tenant, the events waiting while one of its recordings runs in this process. */
  private readonly waiting = new Map<string, Waiting[]>();
  /** Where recordings run: the context the log was made in (at start-up: no tenant, no trace). */
  private readonly context = new AsyncResource('EventLog');

  constructor(
    private readonly dataSource: DataSource,
    private readonly cipher: RecordCipher,
    private readonly hooks: {
      /**
       * In the recording transaction: what else must commit with the event (its webhook
       * deliveries). `read` (a statement and its parameters) travels in the round trip that takes
       * the event's position, after it; `write` gets its rows once the event is known.
       */
      readonly whileRecording?: {
        readonly read: (tenantId: string, eventType: string) => { readonly sql: string; readonly parameters: readonly unknown[] };
        readonly write: (manager: EntityManager, tenantId: string, event: TenantEvent, rows: readonly unknown[]) => Promise<number>;
      };
      /** After events committed: their announcements are waiting, and `deliveries` deliveries (what write returned). */
      readonly afterCommit?: (committed: { readonly deliveries: number }) => void;
      /** A batch of `events` events failed as a whole (`error`) and is recorded again event by event. */
      readonly onBatchFailed?: (error: unknown, events: number) => void;
    } = {},
  ) {}

  /**
   * Appends `event` once per `sourceMessageId` (a redelivered service event is recorded once).
   * Taking the next position locks the tenant's position row for the transaction, so positions
   * follow commit order. The event is announced on notify.events.v1 (keyed by tenant) through the
   * outbox, in the same transaction. Resolves once the event committed, with the event as readers
   * see it, or undefined when it was recorded before.
   *
   * One tenant's events are recorded by one transaction at a time in this process: events that come
   * while it runs wait and go together in the next one (up to RECORD_BATCH_EVENTS), so a busy tenant
   * takes its position row once per batch instead of once per event, and its recordings do not
   * queue for the row's lock. A lone event goes at once. The recordings run in the context the log
   * was made in, with only the tenant set (not in the trace of whichever event came first); each
   * announcement carries the trace its event came with.
   */
  async record(sourceMessageId: string, event: LoggedEvent): Promise<TenantEvent | undefined> {
    const { tenantId } = currentTenant();
    return new Promise((resolve, reject) => {
      const waiting: Waiting = { sourceMessageId, event, trace: traceHeaders(), resolve, reject };
      const queue = this.waiting.get(tenantId);
      if (queue) {
        queue.push(waiting);
        return;
      }
      const started = [waiting];
      this.waiting.set(tenantId, started);
      void this.context.runInAsyncScope(() => runWithTenant({ tenantId }, () => this.drain(tenantId, started)));
    });
  }

  /** Records the tenant's waiting events, a batch per transaction, until none is left. */
  private async drain(tenantId: string, queue: Waiting[]): Promise<void> {
    while (queue.length > 0) await this.recordBatch(tenantId, queue.splice(0, RECORD_BATCH_EVENTS));
    this.waiting.delete(tenantId);
  }

  /** Records `batch` in one transaction and settles each caller; never rejects. */
  private async recordBatch(tenantId: string, batch: readonly Waiting[]): Promise<void> {
    // A message delivered again while its first copy waits: recorded once, the copy answers as a redelivery.
    const firsts = new Map<string, Waiting>();
    for (const waiting of batch) if (!firsts.has(waiting.sourceMessageId)) firsts.set(waiting.sourceMessageId, waiting);
    const outcomes = new Map<string, { readonly recorded: TenantEvent | undefined } | { readonly failed: unknown }>();
    const alone = async (waiting: Waiting): Promise<void> => {
      try {
        const [recorded] = (await this.recordTogether(tenantId, [waiting])).values();
        outcomes.set(waiting.sourceMessageId, { recorded });
      } catch (error) {
        // Recorded by another process between the check and the insert (two deliveries racing): a redelivery.
        outcomes.set(waiting.sourceMessageId, isUniqueViolation(error, SOURCE_MESSAGE_CONSTRAINT) ? { recorded: undefined } : { failed: error });
      }
    };
    if (firsts.size === 1) {
      await alone(firsts.values().next().value as Waiting);
    } else {
      try {
        for (const [source, recorded] of await this.recordTogether(tenantId, [...firsts.values()])) outcomes.set(source, { recorded });
      } catch (error) {
        // The whole batch rolled back (a duplicate recorded elsewhere meanwhile, one event the
        // database refuses, the database gone): each event alone, so that one event's failure is
        // its own. (A commit that succeeded but whose answer was lost: each event is then found
        // recorded, and answers as a redelivery.)
        this.hooks.onBatchFailed?.(error, firsts.size);
        for (const waiting of firsts.values()) await alone(waiting);
      }
    }
    for (const waiting of batch) {
      const outcome = outcomes.get(waiting.sourceMessageId);
      if (outcome && 'failed' in outcome) waiting.reject(outcome.failed);
      else waiting.resolve(firsts.get(waiting.sourceMessageId) === waiting ? outcome?.recorded : undefined);
    }
  }

  /**
   * One transaction: the events of `batch` not recorded before, numbered in the batch's order after
   * the tenant's last position, with their announcements and deliveries. Returns them by source
   * message.
   *
   * Round trips while the row is locked: the positions (with the duplicate check, and the reads of
   * whileRecording in the same message), then the events' writes, what else commits with them
   * (their webhooks' deliveries) and the commit, in one message.
   */
  private async recordTogether(tenantId: string, batch: readonly Waiting[]): Promise<Map<string, TenantEvent>> {
    const recorded = new Map<string, TenantEvent>();
    let deliveries = 0;
    await tenantTransaction(this.dataSource, async (manager) => {
      const hooks = this.hooks.whileRecording;
      const types = hooks ? [...new Set(batch.map(({ event }) => event.type))] : [];
      // The messages recorded before take no position: their rows are found first (in the
      // statement's snapshot), and the others keep the batch's order (positions are given below
      // in that order; the aggregate's order only makes the answer read the same way). Two
      // deliveries of one message racing past this check both take a position; the second one's
      // insert then breaks the unique (tenant, source message) and its transaction, positions
      // included, rolls back (recordBatch).
      const [taken, ...subscribers] = await queryInOneTrip(manager, [
        {
          sql: `WITH fresh AS (
                  SELECT t.source, t.n FROM unnest($2::text[]) WITH ORDINALITY AS t(source, n)
                  WHERE NOT EXISTS (SELECT 1 FROM notify.events e WHERE e.tenant_id = $1 AND e.source_message_id = t.source)
                ), bumped AS (
                  INSERT INTO notify.positions AS p (tenant_id, last_position)
                  SELECT $1, count(*) FROM fresh HAVING count(*) > 0
                  ON CONFLICT (tenant_id) DO UPDATE SET last_position = p.last_position + EXCLUDED.last_position
                  RETURNING last_position
                )
                SELECT bumped.last_position, (SELECT array_agg(fresh.source ORDER BY fresh.n) FROM fresh) AS fresh FROM bumped`,
          parameters: [tenantId, batch.map(({ sourceMessageId }) => sourceMessageId)],
        },
        // After the positions in the same message: each its own snapshot, taken once the position's row is ours.
        ...(hooks ? types.map((type) => hooks.read(tenantId, type)) : []),
      ]);
      const [row] = taken as Array<{ last_position: string; fresh: string[] }>;
      if (!row) return;
      const fresh = new Set(row.fresh);
      const events = batch.filter(({ sourceMessageId }) => fresh.has(sourceMessageId));
      const first = BigInt(row.last_position) - BigInt(events.length) + 1n;
      const positions = events.map((_, index) => String(first + BigInt(index)));
      const sealed = await this.cipher.sealAll(
        manager,
        events.map(({ event }, index) => ({ record: { table: 'events', id: positions[index] as string }, value: event.data })),
      );
      for (const [index, { sourceMessageId, event, trace }] of events.entries()) {
        const position = positions[index] as string;
        const nonce = randomBytes(6).toString('hex');
        await deferWrite(
          manager,
          `INSERT INTO notify.events (tenant_id, position, nonce, type, mission_id, data, occurred_at, recorded_at, source_message_id)
           VALUES ($1, $2, $3, $4, $5, $6, $7, clock_timestamp(), $8)`,
          [tenantId, position, nonce, event.type, event.missionId, sealed[index], event.occurredAt, sourceMessageId],
        );
        const logged: TenantEvent = { id: formatEventId(position, nonce), type: event.type, timestamp: new Date(event.occurredAt).toISOString(), data: { ...event.data } };
        await enqueueOutbox(
          manager,
          NOTIFY_SCHEMA,
          { topic: Topics.notifyEvents, type: MessageTypes.tenantEventRecorded, key: tenantId, payload: logged, headers: trace },
          this.cipher,
        );
        if (hooks) deliveries += await hooks.write(manager, tenantId, logged, subscribers[types.indexOf(event.type)] ?? []);
        recorded.set(sourceMessageId, logged);
      }
    });
    if (recorded.size > 0) this.hooks.afterCommit?.({ deliveries });
    return recorded;
  }

  /**
   * The events of `types` recorded after `after` (oldest first, at most `limit`), and the newest
   * event of the log. An `after` the log never issued, or older than what it keeps (events would
   * be missing), is refused (cursor_expired).
   */
  async list(query: ListTenantEvents): Promise<TenantEventPage> {
    const { tenantId } = currentTenant();
    return tenantTransaction(this.dataSource, async (manager) => {
      const [bounds]: Array<{ last_position: string | null; latest_nonce: string | null }> = await manager.query(
        `SELECT p.last_position, (SELECT nonce FROM notify.events e WHERE e.tenant_id = $1 AND e.position = p.last_position) AS latest_nonce
         FROM notify.positions p WHERE p.tenant_id = $1`,
        [tenantId],
      );
      const last = bounds?.last_position ?? '0';
      const from = query.after === undefined ? '0' : await this.positionAfter(manager, tenantId, query.after, last);
      // Up to the newest event read above: one recorded between the two statements waits for the
      // next page, so no item is ever newer than the page's `latest`.
      const rows: StoredEvent[] = await manager.query(
        `SELECT position, nonce, type, data, occurred_at FROM notify.events
         WHERE tenant_id = $1 AND position > $2 AND position <= $5 AND type = ANY($3::text[]) ${query.missionId ? 'AND mission_id = $6' : ''}
         ORDER BY position LIMIT $4`,
        [tenantId, from, query.types, query.limit, last, ...(query.missionId ? [query.missionId] : [])],
      );
      const items: TenantEvent[] = [];
      // One at a time: a data key not cached yet is read on the transaction's one connection.
      for (const row of rows) {
        const data = await this.cipher.open<Record<string, unknown>>(manager, { table: 'events', id: String(row.position) }, row.data);
        items.push({ id: formatEventId(row.position, row.nonce), type: row.type, timestamp: row.occurred_at.toISOString(), data });
      }
      return { items, latest: bounds?.latest_nonce ? formatEventId(last, bounds.latest_nonce) : null };
    });
  }

  /** The position of event id `after`, checked: issued by this log, and no event after it deleted. */
  private async positionAfter(manager: EntityManager, tenantId: string, after: string, last: string): Promise<string> {
    const position = eventIdPosition(after);
    if (position === undefined || BigInt(position) > BigInt(last)) throw cursorExpired(after);
    const [row]: Array<{ nonce: string | null; oldest: string | null }> = await manager.query(
      `SELECT (SELECT nonce FROM notify.events WHERE tenant_id = $1 AND position = $2) AS nonce,
              (SELECT min(position) FROM notify.events WHERE tenant_id = $1) AS oldest`,
      [tenantId, position],
    );
    if (row?.nonce != null) {
      if (formatEventId(position, row.nonce) !== after) throw cursorExpired(after);
      return position;
    }
    // The event itself is gone: resuming after it is whole only if the next one is still kept.
    const oldest = row?.oldest == null ? BigInt(last) + 1n : BigInt(row.oldest);
    if (BigInt(position) < oldest - 1n) throw cursorExpired(after);
    return position;
  }
}
