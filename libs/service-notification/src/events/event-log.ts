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
import { currentTenant } from '@mission/tenant-context';
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
        readonly write: (manager: EntityManager, tenantId: string, event: TenantEvent, rows: readonly unknown[]) => Promise<unknown>;
      };
      /** After an event committed: its announcement (and deliveries) are waiting. */
      readonly afterCommit?: () => void;
    } = {},
  ) {}

  /**
   * Appends `event` once per `sourceMessageId` (a redelivered service event is recorded once).
   * Taking the next position locks the tenant's position row for the transaction, so positions
   * follow commit order. The event is announced on notify.events.v1 (keyed by tenant) through the
   * outbox, in the same transaction. Returns the event as readers see it, or undefined when it was
   * recorded before.
   *
   * Round trips while the row is locked: the position (with the duplicate check, and the read of
   * whileRecording in the same message), then the event's writes, what else commits with it (its
   * webhooks' deliveries) and the commit, in one message.
   */
  async record(sourceMessageId: string, event: LoggedEvent): Promise<TenantEvent | undefined> {
    const { tenantId } = currentTenant();
    const recorded = await tenantTransaction(this.dataSource, async (manager): Promise<TenantEvent | undefined> => {
      // No row when the message was recorded before. Two deliveries of one message racing past
      // this check both take a position; the second one's insert then breaks the unique
      // (tenant, source message) and its transaction, position included, rolls back (below).
      const extra = this.hooks.whileRecording?.read(tenantId, event.type);
      const [positions, extraRows] = await queryInOneTrip(manager, [
        {
          sql: `INSERT INTO notify.positions AS p (tenant_id, last_position)
                SELECT $1, 1 WHERE NOT EXISTS (SELECT 1 FROM notify.events WHERE tenant_id = $1 AND source_message_id = $2)
                ON CONFLICT (tenant_id) DO UPDATE SET last_position = p.last_position + 1
                RETURNING last_position`,
          parameters: [tenantId, sourceMessageId],
        },
        // After the position in the same message: its own snapshot, taken once the position's row is ours.
        ...(extra ? [extra] : []),
      ]);
      const [next] = positions as Array<{ last_position: string }>;
      if (!next) return undefined;
      const position = String(next.last_position);
      const nonce = randomBytes(6).toString('hex');
      const data = await this.cipher.seal(manager, { table: 'events', id: position }, event.data);
      await deferWrite(
        manager,
        `INSERT INTO notify.events (tenant_id, position, nonce, type, mission_id, data, occurred_at, recorded_at, source_message_id)
         VALUES ($1, $2, $3, $4, $5, $6, $7, clock_timestamp(), $8)`,
        [tenantId, position, nonce, event.type, event.missionId, data, event.occurredAt, sourceMessageId],
      );
      const logged: TenantEvent = { id: formatEventId(position, nonce), type: event.type, timestamp: new Date(event.occurredAt).toISOString(), data: { ...event.data } };
      await enqueueOutbox(manager, NOTIFY_SCHEMA, { topic: Topics.notifyEvents, type: MessageTypes.tenantEventRecorded, key: tenantId, payload: logged }, this.cipher);
      if (this.hooks.whileRecording) await this.hooks.whileRecording.write(manager, tenantId, logged, extraRows ?? []);
      return logged;
    }).catch((error: unknown) => {
      if (isUniqueViolation(error, SOURCE_MESSAGE_CONSTRAINT)) return undefined;
      throw error;
    });
    if (recorded) this.hooks.afterCommit?.();
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
