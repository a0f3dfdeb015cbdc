import { randomUUID } from 'node:crypto';
import { DataSource, EntityManager } from 'typeorm';
import { optionalTenant, runWithoutTenant, TENANT_HEADER, tenantHeaders, traceHeaders } from '@mission/tenant-context';
import { isSealed, RecordCipher } from './data-keys';
import { deferWrite, pipelinedTransaction } from './transaction-pipeline';

/** An event to publish once the transaction that wrote it commits. */
export interface OutboxEvent {
  readonly topic: string;
  readonly type: string;
  readonly key: string;
  readonly payload: unknown;
  readonly headers?: Readonly<Record<string, string>>;
}

export interface OutboxMessage {
  readonly id: string;
  readonly type: string;
  readonly key: string;
  readonly payload: unknown;
  readonly headers?: Record<string, string>;
}

export interface OutboxPublisher {
  /** Publishes the messages together and in order (one aggregate's events keep theirs); fails if any fails. */
  publishAll(items: ReadonlyArray<{ readonly topic: string; readonly message: OutboxMessage }>): Promise<void>;
}

/** DDL of a service's outbox table, for that service's migrations. */
export function outboxTableSql(schema: string): string[] {
  return [
    `CREATE TABLE "${schema}".outbox (
      id uuid PRIMARY KEY,
      topic text NOT NULL,
      type text NOT NULL,
      key text NOT NULL,
      payload jsonb NOT NULL,
      headers jsonb NOT NULL DEFAULT '{}'::jsonb,
      created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
      published_at timestamptz
    )`,
    `CREATE INDEX outbox_unpublished ON "${schema}".outbox (created_at) WHERE published_at IS NULL`,
  ];
}

/** The outbox as a table: tenant events are sealed at rest with the tenant's data key when a cipher is given. */
const OUTBOX_TABLE = 'outbox';

/**
 * Writes an event into the outbox inside the caller's transaction. Returns the event id. The
 * current tenant and trace go into the stored headers: the relay publishes outside any context.
 * With a cipher, a tenant's event payload is stored sealed (a JSON string `enc1.…`), so the
 * database holds no tenant content even for events waiting to be published.
 */
export async function enqueueOutbox(manager: EntityManager, schema: string, event: OutboxEvent, cipher?: RecordCipher): Promise<string> {
  const id = randomUUID();
  const headers = { ...tenantHeaders(), ...traceHeaders(), ...event.headers };
  const tenant = optionalTenant()?.tenantId;
  // The relay opens a sealed payload under the row's tenant header: it must be the tenant it was sealed for.
  if (cipher && tenant && headers[TENANT_HEADER] !== tenant) throw new Error('An outbox event of one tenant cannot name another tenant in its headers');
  const payload = cipher && tenant ? await cipher.seal(manager, { table: OUTBOX_TABLE, id }, event.payload) : event.payload;
  // Goes with the transaction's next statement or its commit: nothing reads it back before then.
  await deferWrite(manager, `INSERT INTO "${schema}".outbox (id, topic, type, key, payload, headers) VALUES ($1, $2, $3, $4, $5, $6)`, [
    id,
    event.topic,
    event.type,
    event.key,
    JSON.stringify(payload),
    JSON.stringify(headers),
  ]);
  return id;
}

interface OutboxRow {
  id: string;
  topic: string;
  type: string;
  key: string;
  payload: unknown;
  headers: Record<string, string>;
}

export interface OutboxRelayOptions {
  /** Opens payloads that enqueueOutbox sealed (required when it was given a cipher). */
  readonly cipher?: RecordCipher;
  readonly pollIntervalMs?: number;
  readonly batchSize?: number;
  readonly onError?: (error: unknown) => void;
}

/**
 * Publishes committed outbox rows in the order they were written and marks them published. One
 * relay of a schema publishes at a time (a transaction-scoped advisory lock; the others skip the
 * pass), so the events of one aggregate leave in order even with several replicas. A crash
 * between publish and mark re-publishes the rows: delivery is at least once, and consumers are
 * idempotent by message id.
 */
export class OutboxRelay {
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
  private again = false;
  private stopped = false;

  constructor(
    private readonly dataSource: DataSource,
    private readonly schema: string,
    private readonly publisher: OutboxPublisher,
    private readonly options: OutboxRelayOptions = {},
  ) {}

  start(): void {
    this.stopped = false;
    this.schedule();
    this.kick();
  }

  /** Asks for a relay pass now (after a commit that wrote outbox rows). */
  kick(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    // Outside the tenant of whoever kicked it: every row carries its own tenant header.
    this.running = runWithoutTenant(() => this.drain())
      .catch((error: unknown) => this.options.onError?.(error))
      .finally(() => {
        this.running = undefined;
        if (this.again) {
          this.again = false;
          this.kick();
        }
      });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    await this.running;
  }

  /** Unpublished rows, for metrics and readiness. */
  async backlog(): Promise<number> {
    const [row] = await this.dataSource.query(`SELECT count(*)::int AS n FROM "${this.schema}".outbox WHERE published_at IS NULL`);
    return row.n as number;
  }

  private schedule(): void {
    this.timer = setInterval(() => this.kick(), this.options.pollIntervalMs ?? 500);
    this.timer.unref();
  }

  /** The row's payload in clear, opened under the tenant its headers name when it was stored sealed. */
  private async payloadOf(manager: EntityManager, row: OutboxRow): Promise<unknown> {
    if (!isSealed(row.payload)) return row.payload;
    const tenantId = row.headers[TENANT_HEADER];
    if (!this.options.cipher || !tenantId) throw new Error(`Outbox row ${row.id} is sealed, but the relay has no cipher or the row no tenant`);
    // A row that cannot be opened (a KEK missing from the configuration) stops the relay loudly rather than drop an event.
    return this.options.cipher.open(manager, { table: OUTBOX_TABLE, id: row.id }, row.payload as string, tenantId);
  }

  private async drain(): Promise<void> {
    const batchSize = this.options.batchSize ?? 100;
    for (;;) {
      // Two round trips a pass: the lock and the rows in one message with the transaction's
      // opening, the marks with its commit. The advisory lock is taken once, before the scan (an
      // uncorrelated subquery is a one-time filter): a relay that does not get it reads and locks nothing.
      const published = await pipelinedTransaction(this.dataSource, [], async (manager) => {
        const rows: OutboxRow[] = await manager.query(
          `SELECT id, topic, type, key, payload, headers FROM "${this.schema}".outbox
           WHERE published_at IS NULL AND (SELECT pg_try_advisory_xact_lock(hashtext($1)))
           ORDER BY created_at, id LIMIT $2 FOR UPDATE`,
          [`outbox:${this.schema}`, batchSize],
        );
        // Opened one after another (a data key not cached yet is read on the transaction's one
        // connection, which takes one query at a time); published up to the first row that cannot
        // be opened, all in one go.
        const payloads: unknown[] = [];
        let unreadable: unknown;
        for (const row of rows) {
          try {
            payloads.push(await this.payloadOf(manager, row));
          } catch (error) {
            unreadable = error ?? new Error(`Outbox row ${row.id} cannot be opened`);
            break;
          }
        }
        const readable = rows.slice(0, payloads.length);
        if (readable.length > 0) {
          await this.publisher.publishAll(
            readable.map((row, index) => ({
              topic: row.topic,
              message: { id: row.id, type: row.type, key: row.key, payload: payloads[index], headers: row.headers },
            })),
          );
          // Stop at an unreadable row, but keep what went before published: it is not sent again on every pass.
          const ids = readable.map((row) => row.id);
          // One statement whatever the number of rows: PostgreSQL keeps it prepared.
          await deferWrite(manager, `UPDATE "${this.schema}".outbox SET published_at = clock_timestamp() WHERE id = ANY($1::uuid[])`, [ids]);
        }
        return unreadable === undefined ? rows.length : { stoppedBy: unreadable };
      });
      if (typeof published !== 'number') throw published.stoppedBy;
      if (published < batchSize || this.stopped) return;
    }
  }
}
