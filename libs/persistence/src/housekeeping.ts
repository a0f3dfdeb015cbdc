import { DataSource } from 'typeorm';

/** One sweep: deletes what has outlived its use and says how many rows went. */
export interface SweepTask {
  readonly name: string;
  run(dataSource: DataSource): Promise<number>;
}

/** How long consumed-message ids and published outbox rows are kept: well past Kafka's default 7-day retention, so no redelivery can outlive its record. */
export const MESSAGE_RECORD_RETENTION_DAYS = 14;
/** Rows one statement deletes at most, so a long backlog never holds one long transaction. */
export const SWEEP_BATCH = 5_000;

/** Rows of `<schema>.<table>` whose `timestampColumn` is older than the retention, in batches (rows where it is NULL stay). */
function retentionSweep(schema: string, table: string, timestampColumn: string, retentionDays: number): SweepTask {
  return {
    name: `${schema}.${table}`,
    run: (dataSource) =>
      deleteInBatches(
        dataSource,
        `WITH deleted AS (
           DELETE FROM "${schema}"."${table}" WHERE ctid = ANY (ARRAY(
             SELECT ctid FROM "${schema}"."${table}" WHERE ${timestampColumn} < now() - make_interval(days => $1) LIMIT $2))
           RETURNING 1)
         SELECT count(*)::integer AS deleted FROM deleted`,
        [retentionDays],
      ),
  };
}

/** Consumed-message ids older than the retention (`processed_messages` holds no tenant rows). */
export function processedMessagesSweep(schema: string, retentionDays = MESSAGE_RECORD_RETENTION_DAYS): SweepTask {
  return retentionSweep(schema, 'processed_messages', 'processed_at', retentionDays);
}

/** Outbox rows published longer ago than the retention; unpublished rows are never touched. */
export function publishedOutboxSweep(schema: string, retentionDays = MESSAGE_RECORD_RETENTION_DAYS): SweepTask {
  return retentionSweep(schema, 'outbox', 'published_at', retentionDays);
}

/**
 * Runs `sql` until a batch deletes fewer rows than the batch. The statement takes the batch size
 * as its last parameter and answers one row with the number it deleted in `deleted`.
 */
export async function deleteInBatches(dataSource: DataSource, sql: string, parameters: unknown[]): Promise<number> {
  let total = 0;
  for (;;) {
    const [row] = (await dataSource.query(sql, [...parameters, SWEEP_BATCH])) as Array<{ deleted: number }>;
    const deleted = Number(row?.deleted ?? 0);
    total += deleted;
    if (deleted < SWEEP_BATCH) return total;
  }
}

export interface HousekeeperOptions {
  /** Between sweeps (default 1 h); the first runs a minute after start. */
  readonly intervalMs?: number;
  readonly firstDelayMs?: number;
  readonly onSwept?: (task: string, rows: number) => void;
  readonly onError?: (task: string, error: unknown) => void;
}

/**
 * Deletes a service's expired rows on a timer: without it idempotency keys, consumed-message
 * ids and published outbox rows would grow without bound. Every replica sweeps; the deletes are
 * idempotent, so that costs a little repeated work and nothing else.
 */
export class Housekeeper {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> = Promise.resolve();
  private stopped = false;

  constructor(
    private readonly dataSource: DataSource,
    private readonly tasks: readonly SweepTask[],
    private readonly options: HousekeeperOptions = {},
  ) {}

  start(): void {
    this.schedule(this.options.firstDelayMs ?? 60_000);
  }

  /** One pass over every task now; a failing task does not stop the others. */
  async sweep(): Promise<Record<string, number>> {
    const swept: Record<string, number> = {};
    for (const task of this.tasks) {
      try {
        swept[task.name] = await task.run(this.dataSource);
        if (swept[task.name] > 0) this.options.onSwept?.(task.name, swept[task.name]);
      } catch (error) {
        this.options.onError?.(task.name, error);
      }
    }
    return swept;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.running;
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.running = this.sweep().then(() => this.schedule(this.options.intervalMs ?? 3_600_000));
    }, delayMs);
    this.timer.unref();
  }
}
