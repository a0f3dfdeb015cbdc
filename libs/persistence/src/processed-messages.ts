import { EntityManager } from 'typeorm';

/** DDL of a service's processed-message table, for that service's migrations. */
export function processedMessagesTableSql(schema: string): string[] {
  return [
    `CREATE TABLE "${schema}".processed_messages (
      consumer text NOT NULL,
      message_id text NOT NULL,
      processed_at timestamptz NOT NULL DEFAULT clock_timestamp(),
      PRIMARY KEY (consumer, message_id)
    )`,
  ];
}

/**
 * Records that `consumer` handled `messageId`, inside the transaction that applies its effect.
 * Returns false when it was already recorded: the caller then skips the effect, so a redelivered
 * message changes nothing.
 */
export async function markProcessed(manager: EntityManager, schema: string, consumer: string, messageId: string): Promise<boolean> {
  const rows: unknown[] = await manager.query(`INSERT INTO "${schema}".processed_messages (consumer, message_id) VALUES ($1, $2) ON CONFLICT DO NOTHING RETURNING 1`, [
    consumer,
    messageId,
  ]);
  return rows.length === 1;
}
