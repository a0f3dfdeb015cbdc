import { randomBytes, randomUUID } from 'node:crypto';
import { DataSource, EntityManager } from 'typeorm';
import {
  type CreatedWebhookView,
  type CreateWebhook,
  decodeCursor,
  DomainError,
  encodeCursor,
  ErrorCode,
  isUuid,
  MAX_WEBHOOKS_PER_TENANT,
  type Page,
  type TenantEvent,
  type TenantEventType,
  WEBHOOK_TEST_EVENT,
  type WebhookDeliveryView,
  type WebhookView,
} from '@mission/contracts';
import { deferWrite, RecordCipher, tenantTransaction } from '@mission/persistence';
import { currentTenant } from '@mission/tenant-context';
import type { WebhookTargetPolicy } from './target-policy';

/** What a webhook keeps sealed: where it points, what its owner wrote about it, and its signing secret. */
export interface WebhookSecrets {
  readonly url: string;
  readonly description?: string;
  readonly secret: string;
}

interface WebhookRow {
  id: string;
  events: TenantEventType[];
  sealed: string;
  created_at: Date;
}

interface DeliveryRow {
  id: string;
  event_id: string;
  event_type: string;
  state: 'pending' | 'succeeded' | 'failed';
  attempts: number;
  response_status: number | null;
  error: string | null;
  created_at: Date;
}

/** A new signing secret: `whsec_` and the base64 of 32 random bytes (Standard Webhooks). */
export function newWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

export function deliveryView(row: DeliveryRow): WebhookDeliveryView {
  return {
    id: row.id,
    eventId: row.event_id,
    eventType: row.event_type,
    attempt: Math.max(1, row.attempts),
    status: row.state,
    ...(row.response_status === null ? {} : { responseStatus: row.response_status }),
    ...(row.error === null ? {} : { error: row.error }),
    createdAt: row.created_at.toISOString(),
  };
}

const DELIVERY_COLUMNS = `id, event_id, event_type, state, attempts, response_status, error, created_at`;

/**
 * The current tenant's webhooks: subscriptions kept sealed, and the deliveries of its events to
 * them. Deliveries are created in the transaction that records their event (enqueue), so none is
 * lost; the dispatcher sends them.
 */
export class Webhooks {
  constructor(
    private readonly dataSource: DataSource,
    private readonly cipher: RecordCipher,
    private readonly policy: WebhookTargetPolicy,
    /** Called after deliveries committed: the dispatcher sends them now instead of at its next poll. */
    private readonly afterCommit: () => void = () => undefined,
  ) {}

  async create(request: CreateWebhook): Promise<CreatedWebhookView> {
    const url = await this.policy.check(request.url);
    const { tenantId } = currentTenant();
    const id = randomUUID();
    const secret = newWebhookSecret();
    const createdAt = new Date();
    const secrets: WebhookSecrets = { url: url.href, ...(request.description === undefined ? {} : { description: request.description }), secret };
    await tenantTransaction(this.dataSource, async (manager) => {
      // One tenant's webhooks are counted under a lock of their own, so two creations cannot both pass the limit.
      await manager.query(`SELECT pg_advisory_xact_lock(hashtextextended('notify.webhooks:' || $1::text, 0))`, [tenantId]);
      const [{ count }]: Array<{ count: number }> = await manager.query(`SELECT count(*)::int AS count FROM notify.webhooks WHERE tenant_id = $1`, [tenantId]);
      if (count >= MAX_WEBHOOKS_PER_TENANT) {
        throw new DomainError(ErrorCode.Conflict, `The tenant holds ${MAX_WEBHOOKS_PER_TENANT} webhooks already; delete one first`);
      }
      await manager.query(`INSERT INTO notify.webhooks (id, tenant_id, events, sealed, created_at) VALUES ($1, $2, $3::text[], $4, $5)`, [
        id,
        tenantId,
        request.events,
        await this.cipher.seal(manager, { table: 'webhooks', id }, secrets),
        createdAt,
      ]);
    });
    return {
      id,
      url: secrets.url,
      events: [...request.events],
      ...(request.description === undefined ? {} : { description: request.description }),
      secret,
      createdAt: createdAt.toISOString(),
    };
  }

  async list(limit: number, cursor?: string): Promise<Page<WebhookView>> {
    const { tenantId } = currentTenant();
    const after = cursor ? decodeCursor(cursor) : undefined;
    return tenantTransaction(this.dataSource, async (manager) => {
      const rows: WebhookRow[] = after
        ? await manager.query(
            `SELECT id, events, sealed, created_at FROM notify.webhooks WHERE tenant_id = $1 AND (created_at, id) < ($3::timestamptz, $4::uuid) ORDER BY created_at DESC, id DESC LIMIT $2`,
            [tenantId, limit + 1, after.at, after.id],
          )
        : await manager.query(`SELECT id, events, sealed, created_at FROM notify.webhooks WHERE tenant_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2`, [tenantId, limit + 1]);
      const items: WebhookView[] = [];
      // One at a time: a data key not cached yet is read on the transaction's one connection.
      for (const row of rows.slice(0, limit)) items.push(await this.view(manager, row));
      const last = rows.length > limit ? rows[limit - 1] : undefined;
      return { items, nextCursor: last ? encodeCursor({ at: last.created_at.toISOString(), id: last.id }) : null };
    });
  }

  async get(id: string): Promise<WebhookView> {
    return tenantTransaction(this.dataSource, async (manager) => this.view(manager, await this.find(manager, id)));
  }

  /** Deletes the webhook with its deliveries: nothing more is sent to it. */
  async delete(id: string): Promise<{ id: string }> {
    const { tenantId } = currentTenant();
    await tenantTransaction(this.dataSource, async (manager) => {
      await this.find(manager, id, true);
      await manager.query(`DELETE FROM notify.webhooks WHERE tenant_id = $1 AND id = $2`, [tenantId, id]);
    });
    return { id };
  }

  /** The webhook's deliveries, newest first. */
  async deliveries(id: string, limit: number, cursor?: string): Promise<Page<WebhookDeliveryView>> {
    const { tenantId } = currentTenant();
    const after = cursor ? decodeCursor(cursor) : undefined;
    return tenantTransaction(this.dataSource, async (manager) => {
      await this.find(manager, id);
      const rows: DeliveryRow[] = after
        ? await manager.query(
            `SELECT ${DELIVERY_COLUMNS} FROM notify.deliveries WHERE tenant_id = $1 AND webhook_id = $2 AND (created_at, id) < ($4::timestamptz, $5::uuid)
             ORDER BY created_at DESC, id DESC LIMIT $3`,
            [tenantId, id, limit + 1, after.at, after.id],
          )
        : await manager.query(`SELECT ${DELIVERY_COLUMNS} FROM notify.deliveries WHERE tenant_id = $1 AND webhook_id = $2 ORDER BY created_at DESC, id DESC LIMIT $3`, [
            tenantId,
            id,
            limit + 1,
          ]);
      const last = rows.length > limit ? rows[limit - 1] : undefined;
      return { items: rows.slice(0, limit).map(deliveryView), nextCursor: last ? encodeCursor({ at: last.created_at.toISOString(), id: last.id }) : null };
    });
  }

  /** Queues a `webhook.test` event for the webhook, sent at once. */
  async test(id: string): Promise<WebhookDeliveryView> {
    const { tenantId } = currentTenant();
    const row = await tenantTransaction(this.dataSource, async (manager) => {
      await this.find(manager, id);
      const event = { id: `evt_test_${randomBytes(6).toString('hex')}`, type: WEBHOOK_TEST_EVENT, timestamp: new Date().toISOString(), data: { webhookId: id } };
      const insert = await this.deliveriesInsert(manager, tenantId, [id], event);
      const [delivery]: DeliveryRow[] = await manager.query(`${insert.statement} RETURNING ${DELIVERY_COLUMNS}`, insert.parameters);
      return delivery;
    });
    this.afterCommit();
    return deliveryView(row);
  }

  /**
   * The tenant's webhooks subscribed to events of `eventType`: read while an event is recorded
   * (EventLog's whileRecording), and held (FOR KEY SHARE) until it commits, so that a webhook
   * deleted meanwhile waits and takes the event's delivery with it, instead of failing the
   * delivery's insert and with it the event's recording.
   */
  subscribersRead(tenantId: string, eventType: string): { sql: string; parameters: string[] } {
    return { sql: `SELECT id FROM notify.webhooks WHERE tenant_id = $1 AND $2 = ANY(events) FOR KEY SHARE`, parameters: [tenantId, eventType] };
  }

  /**
   * In the transaction recording `event`: one delivery of it to each of `subscribed` (the rows of
   * subscribersRead). The insert goes with the transaction's commit.
   */
  async enqueue(manager: EntityManager, tenantId: string, event: TenantEvent, subscribed: ReadonlyArray<{ readonly id: string }>): Promise<number> {
    if (subscribed.length === 0) return 0;
    const insert = await this.deliveriesInsert(
      manager,
      tenantId,
      subscribed.map(({ id }) => id),
      event,
    );
    await deferWrite(manager, insert.statement, insert.parameters);
    return subscribed.length;
  }

  /**
   * The insert of one pending delivery of `event` to each of `webhookIds`, due now, its payload
   * sealed: one statement, its parameters plain values (so that it can travel with the next one).
   */
  private async deliveriesInsert(
    manager: EntityManager,
    tenantId: string,
    webhookIds: readonly string[],
    event: { readonly id: string; readonly type: string; readonly timestamp: string; readonly data: unknown },
  ): Promise<{ statement: string; parameters: string[] }> {
    const ids = webhookIds.map(() => randomUUID());
    const body = JSON.stringify(event);
    const payloads = await this.cipher.sealAll(
      manager,
      ids.map((id) => ({ record: { table: 'deliveries', id }, value: body })),
    );
    // No string constant in the text: a statement holding one is not inlined into the next message.
    const parameters = [tenantId, event.id, event.type, 'pending'];
    const rows = ids.map((id, index) => {
      parameters.push(id, webhookIds[index], payloads[index]);
      const at = parameters.length - 2;
      return `($${at}::uuid, $1::uuid, $${at + 1}::uuid, $2, $3, $${at + 2}, $4, 0, clock_timestamp(), clock_timestamp(), clock_timestamp())`;
    });
    return {
      statement: `INSERT INTO notify.deliveries (id, tenant_id, webhook_id, event_id, event_type, payload, state, attempts, next_attempt_at, created_at, updated_at)
       VALUES ${rows.join(', ')}`,
      parameters,
    };
  }

  /** The tenant's webhook `id` (locked with `forUpdate`); 404 for any other id, a malformed one included. */
  private async find(manager: EntityManager, id: string, forUpdate = false): Promise<WebhookRow> {
    if (!isUuid(id)) throw DomainError.notFound('Webhook');
    const { tenantId } = currentTenant();
    const [row]: WebhookRow[] = await manager.query(
      `SELECT id, events, sealed, created_at FROM notify.webhooks WHERE tenant_id = $1 AND id = $2${forUpdate ? ' FOR UPDATE' : ''}`,
      [tenantId, id],
    );
    if (!row) throw DomainError.notFound('Webhook');
    return row;
  }

  private async view(manager: EntityManager, row: WebhookRow): Promise<WebhookView> {
    const { url, description } = await this.cipher.open<WebhookSecrets>(manager, { table: 'webhooks', id: row.id }, row.sealed);
    return { id: row.id, url, events: row.events, ...(description === undefined ? {} : { description }), createdAt: row.created_at.toISOString() };
  }
}
