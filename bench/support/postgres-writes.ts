import { Client } from 'pg';

/**
 * What PostgreSQL wrote while a measured run was on, from its cumulative statistics views
 * (PostgreSQL 18: `pg_stat_wal`, `pg_stat_checkpointer`, `pg_stat_io`): the WAL's volume and how
 * much of it is full-page images, the checkpoints, and the data and WAL written by each kind of
 * process. Backends flush their statistics at most once a second, so a run's last second may be
 * missing: read it over loads of many seconds.
 */
export interface PostgresWriteSnapshot {
  readonly walRecords: number;
  /** Full-page images: a page's first change after a checkpoint writes the whole page to the WAL. */
  readonly walFullPageImages: number;
  readonly walBytes: number;
  readonly checkpoints: number;
  readonly checkpointBuffersWritten: number;
  /** Bytes written and extended, by `backend_type/object/context` (only rows that wrote). */
  readonly io: Readonly<Record<string, { readonly writeBytes: number; readonly extendBytes: number; readonly fsyncs: number }>>;
}

export interface PostgresWrites {
  readonly walMegabytes: number;
  readonly walRecords: number;
  readonly walFullPageImages: number;
  /** The full-page images' share of the WAL, estimated at 8 kB each (an upper bound: a page's hole is not logged). */
  readonly fullPageImageShare: number;
  readonly checkpoints: number;
  readonly checkpointBuffersWritten: number;
  /** Megabytes written (or extended), by `backend_type/object/context`, largest first, ≥ 0.5 MB. */
  readonly io: Readonly<Record<string, number>>;
}

const PAGE_BYTES = 8192;

export async function postgresWriteSnapshot(database: Client): Promise<PostgresWriteSnapshot> {
  const wal = (await database.query(`SELECT wal_records::float8 AS records, wal_fpi::float8 AS fpi, wal_bytes::float8 AS bytes FROM pg_stat_wal`)).rows[0];
  const checkpointer = (await database.query(`SELECT (num_timed + num_requested)::float8 AS checkpoints, buffers_written::float8 AS buffers FROM pg_stat_checkpointer`)).rows[0];
  const { rows } = await database.query(
    `SELECT backend_type, object, context,
            coalesce(write_bytes, 0)::float8 AS write_bytes, coalesce(extend_bytes, 0)::float8 AS extend_bytes, coalesce(fsyncs, 0)::float8 AS fsyncs
       FROM pg_stat_io
      WHERE coalesce(write_bytes, 0) > 0 OR coalesce(extend_bytes, 0) > 0 OR coalesce(fsyncs, 0) > 0`,
  );
  const io: Record<string, { writeBytes: number; extendBytes: number; fsyncs: number }> = {};
  for (const row of rows) io[`${row.backend_type}/${row.object}/${row.context}`] = { writeBytes: row.write_bytes, extendBytes: row.extend_bytes, fsyncs: row.fsyncs };
  return {
    walRecords: wal.records,
    walFullPageImages: wal.fpi,
    walBytes: wal.bytes,
    checkpoints: checkpointer.checkpoints,
    checkpointBuffersWritten: checkpointer.buffers,
    io,
  };
}

const megabytes = (bytes: number): number => Math.round(bytes / 1e5) / 10;

/** What was written between two snapshots of the same cluster. */
export function postgresWritesBetween(before: PostgresWriteSnapshot, after: PostgresWriteSnapshot): PostgresWrites {
  const walBytes = after.walBytes - before.walBytes;
  const walFullPageImages = after.walFullPageImages - before.walFullPageImages;
  const io: [string, number][] = [];
  for (const [key, now] of Object.entries(after.io)) {
    const then = before.io[key];
    const bytes = now.writeBytes + now.extendBytes - (then ? then.writeBytes + then.extendBytes : 0);
    if (bytes >= 5e5) io.push([key, megabytes(bytes)]);
  }
  io.sort((a, b) => b[1] - a[1]);
  return {
    walMegabytes: megabytes(walBytes),
    walRecords: after.walRecords - before.walRecords,
    walFullPageImages,
    fullPageImageShare: walBytes > 0 ? Math.round((Math.min(walBytes, walFullPageImages * PAGE_BYTES) / walBytes) * 100) / 100 : 0,
    checkpoints: after.checkpoints - before.checkpoints,
    checkpointBuffersWritten: after.checkpointBuffersWritten - before.checkpointBuffersWritten,
    io: Object.fromEntries(io),
  };
}
