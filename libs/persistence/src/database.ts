import { DatabaseError, type Pool, type QueryResult } from 'pg';
import { DataSource, EntityManager, EntitySchema, MigrationExecutor, MixedList } from 'typeorm';
import { TurnBatcher } from '@mission/contracts';
import { currentTenant } from '@mission/tenant-context';
import { bind, endsSession, type Item, pipelinedTransaction, type Preparation, preparationOfPool } from './transaction-pipeline';

export interface ServiceDatabaseOptions {
  /** postgres:// URL of the schema's owner: migrations run as this user. */
  readonly url: string;
  /** The service's own schema; nothing else is touched. */
  readonly schema: string;
  // eslint-disable-next-line @typescript-eslint/no-unsafe-function-type
  readonly entities: MixedList<Function | string | EntitySchema>;
  // eslint-disable-next-line @typescript-eslint/no-unsafe-function-type
  readonly migrations: MixedList<Function | string>;
  readonly applicationName: string;
  readonly poolSize?: number;
  /**
   * The role every query of the returned DataSource runs as (see createServiceRole): entered with
   * `SET ROLE` on each new connection, through the connection's startup options. Without it the
   * DataSource runs as the connecting user (for schemas without tenant data, e.g. identity).
   */
  readonly serviceRole?: string;
}

const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

function dataSourceFor(options: ServiceDatabaseOptions, extra: Record<string, unknown>): DataSource {
  const source: DataSource = new DataSource({
    type: 'postgres',
    url: options.url,
    schema: options.schema,
    entities: options.entities,
    migrations: options.migrations,
    migrationsTableName: 'migrations',
    synchronize: false,
    migrationsRun: false,
    logging: ['error', 'warn', 'migration'],
    applicationName: options.applicationName,
    extra: { connectionTimeoutMillis: 5_000, ...extra },
    // A connection the server ends while this pool is closing (the embedded PostgreSQL stops right
    // after the services) is expected; any other error of an idle connection is worth a warning.
    // (Called by the pool itself, as its 'error' listener: `this` is the pool.)
    poolErrorHandler: function (this: { ending?: boolean } | undefined, error: unknown) {
      if (this?.ending || !source.isInitialized) return;
      source.logger.log('warn', `Postgres pool of ${options.applicationName} raised an error (the pool reconnects): ${String(error)}`);
    },
  });
  return source;
}

/**
 * Brings the schema up to date with its migrations (never `synchronize`), as the connecting user.
 * Replicas starting together take turns through an advisory lock, so each migration runs once.
 */
async function migrate(options: ServiceDatabaseOptions): Promise<void> {
  const owner = dataSourceFor(options, { max: 1 });
  await owner.initialize();
  const lock = owner.createQueryRunner();
  try {
    await lock.connect();
    await lock.query('SELECT pg_advisory_lock(hashtext($1))', [`migrations:${options.schema}`]);
    await lock.query(`CREATE SCHEMA IF NOT EXISTS "${options.schema}"`);
    // On the connection that holds the lock: the pool has no second one.
    const migrations = new MigrationExecutor(owner, lock);
    migrations.transaction = 'each';
    await migrations.executePendingMigrations();
  } finally {
    await lock.query('SELECT pg_advisory_unlock(hashtext($1))', [`migrations:${options.schema}`]).catch(() => undefined);
    await lock.release();
    await owner.destroy();
  }
}

/** Refuses to serve through a role that row-level security would not apply to. */
async function assertRowLevelSecurityApplies(dataSource: DataSource, role: string): Promise<void> {
  const [row] = await dataSource.query(`SELECT current_user AS role, rolsuper AS superuser, rolbypassrls AS bypass FROM pg_roles WHERE rolname = current_user`);
  if (!row || row.role !== role) throw new Error(`Expected queries to run as ${role}, but they run as ${row?.role ?? 'an unknown role'}`);
  if (row.superuser || row.bypass) throw new Error(`The service role ${role} bypasses row-level security (superuser or BYPASSRLS)`);
}

/**
 * Opens the DataSource of one service's schema after migrating it as the connecting user. With a
 * `serviceRole`, every pooled connection then runs as that role, which row-level security binds.
 */
export async function openServiceDatabase(options: ServiceDatabaseOptions): Promise<DataSource> {
  if (!SCHEMA_NAME.test(options.schema)) throw new Error(`Invalid schema name: ${options.schema}`);
  if (options.serviceRole !== undefined && !SCHEMA_NAME.test(options.serviceRole)) throw new Error(`Invalid role name: ${options.serviceRole}`);
  await migrate(options);
  const dataSource = dataSourceFor(options, {
    max: options.poolSize ?? 10,
    ...(options.serviceRole ? { options: `-c role=${options.serviceRole}` } : {}),
  });
  await dataSource.initialize();
  try {
    if (options.serviceRole) await assertRowLevelSecurityApplies(dataSource, options.serviceRole);
  } catch (error) {
    await dataSource.destroy();
    throw error;
  }
  return dataSource;
}

/**
 * Runs `work` in a transaction bound to the current tenant: `app.tenant_id` is set for the
 * transaction, which row-level security policies read. Throws without a tenant context.
 *
 * The setting travels with the transaction's opening and its first statement, in one
 * simple-protocol message, and writes handed to deferWrite go with the next statement or the
 * COMMIT (pipelinedTransaction): a mission transition costs two round trips. Statements whose
 * parameters can be inlined run prepared (see pipelinedTransaction; in a transaction with
 * `settings`, as statements of their own for those settings); the others go as TypeORM's
 * parameterised queries.
 */
export async function tenantTransaction<T>(
  dataSource: DataSource,
  work: (manager: EntityManager) => Promise<T>,
  options: {
    /**
     * Settings (names to values) of this transaction only, set with the tenant: they travel in
     * the same message, and apply from the transaction's first statement on (its planning included).
     */
    readonly settings?: Readonly<Record<string, string>>;
  } = {},
): Promise<T> {
  const { tenantId } = currentTenant();
  const settings = Object.entries(options.settings ?? {});
  const parameters: string[] = ['app.tenant_id', tenantId];
  for (const [name, value] of settings) {
    if (!SETTING_NAME.test(name)) throw new TypeError(`Not a setting's name: ${name}`);
    // Set after the tenant, these would win: nothing that decides who the statements run as, or what they see.
    if (PROTECTED_SETTINGS.has(name)) throw new TypeError(`The setting ${name} cannot be changed by a transaction's settings`);
    parameters.push(name, value);
  }
  const calls = Array.from({ length: parameters.length / 2 }, (_call, index) => `set_config($${2 * index + 1}, $${2 * index + 2}, true)`);
  // Settings change how the transaction's statements are planned: a plan PostgreSQL keeps for a
  // prepared statement must only serve transactions with the same settings, so they name the
  // statements' plan context (their names differ from the same statements' without them).
  const planContext = settings.length === 0 ? undefined : JSON.stringify([...settings].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  return pipelinedTransaction(dataSource, [{ sql: `SELECT ${calls.join(', ')}`, parameters }], work, { planContext });
}

/** A PostgreSQL setting's own name (`work_mem`, `enable_seqscan`); names with a prefix (`app.tenant_id`) are not for this. */
const SETTING_NAME = /^[a-z_][a-z0-9_]*$/;

/**
 * The SQLSTATE PostgreSQL answered with, whether `error` is node-postgres's own or TypeORM's
 * QueryFailedError around it (`driverError`); undefined for anything else.
 */
export function sqlStateOf(error: unknown): string | undefined {
  const { code, driverError } = (error ?? {}) as { code?: unknown; driverError?: { code?: unknown } };
  const state = typeof code === 'string' ? code : driverError?.code;
  return typeof state === 'string' ? state : undefined;
}

/** Settings that decide who statements run as, under which policies and which schemas: never per transaction. */
const PROTECTED_SETTINGS: ReadonlySet<string> = new Set(['role', 'session_authorization', 'row_security', 'search_path', 'default_transaction_read_only', 'transaction_read_only']);

/** What runs a parameterised query: an EntityManager, a DataSource, or tenantReader(). */
export interface Queryable {
  // Rows are untyped here, as in TypeORM's own query().
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  query(sql: string, parameters?: unknown[]): Promise<any>;
}

/** Reads of one turn of the event loop gathered into one message: at most this many. */
const MAX_READS_PER_MESSAGE = 32;

interface QueuedRead {
  /** Its tenant's setting, then its statement. */
  readonly items: readonly [Item, Item];
  resolve(rows: unknown[]): void;
  reject(error: unknown): void;
}

/**
 * Sends the tenant reads issued in one turn of the event loop (flushed by setImmediate, after
 * every socket that was ready has been read) as one simple-protocol message (each its own
 * `set_config` and statement, in order, so every statement runs as its own tenant): under load
 * a service sends one message and wakes one backend per batch of reads instead of per read.
 * The statements run prepared, as in pipelinedTransaction. When one statement fails PostgreSQL
 * aborts the rest of the message; the reads of that batch then run one by one, so each caller
 * gets its own rows or its own error.
 */
class ReadBatcher {
  private readonly batcher = new TurnBatcher<QueuedRead>(MAX_READS_PER_MESSAGE, (batch) => void this.send(batch));
  private readonly preparation: Preparation;

  constructor(private readonly pool: Pool) {
    this.preparation = preparationOfPool(pool);
  }

  read(items: readonly [Item, Item]): Promise<unknown[]> {
    return new Promise((resolve, reject) => this.batcher.add({ items, resolve, reject }));
  }

  /** The results of `reads`' statements, in order: two per read (its setting and its statement). */
  private async run(reads: readonly QueuedRead[]): Promise<QueryResult[]> {
    const client = await this.pool.connect();
    let broken: Error | undefined;
    // A checked-out connection has no listener of the pool's: a session the server ends while
    // this read runs would otherwise be an uncaught error event.
    const onError = (error: Error): void => {
      broken ??= error;
    };
    client.on('error', onError);
    try {
      const rendered = this.preparation.render(
        client,
        reads.flatMap((read) => read.items),
      );
      let results: unknown;
      try {
        results = await client.query(rendered.text);
      } catch (error) {
        // PostgreSQL's refusal leaves the connection usable, unless it ended the session (FATAL,
        // say pg_terminate_backend): the socket's close may come only after that answer.
        if (!(error instanceof DatabaseError) || endsSession(error)) broken ??= error as Error;
        else if (this.preparation.failed(rendered, error) && !broken) await this.preparation.forget(client);
        throw broken ?? error;
      }
      this.preparation.ran(client, rendered);
      const all = (Array.isArray(results) ? results : [results]) as QueryResult[];
      // Every read's two statements must have answered, or the answer cannot be attributed.
      if (rendered.resultIndexes.length !== 2 * reads.length || rendered.resultIndexes.some((index) => all[index] === undefined)) {
        throw new Error(`PostgreSQL answered ${reads.length} tenant reads with ${all.length} results instead of ${rendered.resultIndexes.length}`);
      }
      return rendered.resultIndexes.map((index) => all[index] as QueryResult);
    } finally {
      client.removeListener('error', onError);
      // A connection that failed otherwise than by PostgreSQL's answer is not reused.
      client.release(broken);
    }
  }

  private async send(batch: QueuedRead[]): Promise<void> {
    if (batch.length === 1) return this.sendOne(batch[0] as QueuedRead);
    let results: QueryResult[];
    try {
      results = await this.run(batch);
    } catch (error) {
      // A statement PostgreSQL refused aborted the others: each runs again on its own. Anything
      // else (no connection, a timeout) would fail them all again: each gets the error now.
      if (error instanceof DatabaseError) await Promise.all(batch.map((read) => this.sendOne(read)));
      else batch.forEach((read) => read.reject(error));
      return;
    }
    batch.forEach((read, index) => read.resolve((results[2 * index + 1] as QueryResult).rows));
  }

  private async sendOne(read: QueuedRead): Promise<void> {
    try {
      const [, result] = await this.run([read]);
      read.resolve((result as QueryResult).rows);
    } catch (error) {
      read.reject(error);
    }
  }
}

const batchers = new WeakMap<Pool, ReadBatcher>();

/**
 * Reads in the current tenant's transaction in one round trip instead of four (BEGIN, the
 * tenant setting, the statement, COMMIT): PostgreSQL runs the statements of one simple-protocol
 * message as one implicit transaction, so `set_config(…, true)` holds for the statement after it
 * (until the next `set_config`) and ends with the message, and row-level security applies
 * exactly as in tenantTransaction. Reads issued in the same turn of the event loop share a message (ReadBatcher).
 * The simple protocol takes no parameters, so `$n` are inlined as escaped literals, into the
 * statement or into the EXECUTE of its prepared form. For single SELECT statements only: a
 * statement that writes belongs in tenantTransaction.
 */
export function tenantReader(dataSource: DataSource): Queryable {
  const pool = (dataSource.driver as unknown as { master: Pool }).master;
  let batcher = batchers.get(pool);
  if (!batcher) batchers.set(pool, (batcher = new ReadBatcher(pool)));
  const reads = batcher;
  return {
    async query(sql: string, parameters: unknown[] = []): Promise<unknown[]> {
      const { tenantId } = currentTenant();
      if (/;\s*\S/.test(sql)) throw new TypeError('A tenant read is one statement');
      const setting = bind(TENANT_SETTING, ['app.tenant_id', tenantId]);
      if (setting === undefined) throw new TypeError('The tenant cannot be inlined into a tenant read');
      const bound = bind(sql, parameters);
      let statement: Item;
      if (bound !== undefined) statement = bound;
      else {
        for (const [placeholder, index] of sql.matchAll(/\$(\d+)/g)) {
          if (Number(index) > parameters.length) throw new RangeError(`No parameter ${placeholder}`);
        }
        if (parameters.some((value) => typeof value === 'string' && value.includes('\u0000'))) throw new TypeError('Text with a NUL character cannot be sent to PostgreSQL');
        // A statement with string constants, comments or dollar quotes cannot be cut safely at its
        // `$n` (a value could land inside a constant, or outside its quotes): it takes no parameters.
        if (parameters.length > 0 || /\$\d/.test(sql)) {
          throw new TypeError(
            'A tenant read takes text, finite numbers, booleans, dates, null and arrays of them, in a statement without string constants, comments or dollar quotes',
          );
        }
        statement = sql.replace(/;\s*$/, '');
      }
      return reads.read([setting, statement]);
    },
  };
}

/** The tenant's setting for one statement or transaction. */
const TENANT_SETTING = `SELECT set_config($1, $2, true)`;

export async function pingDatabase(dataSource: DataSource): Promise<boolean> {
  try {
    await dataSource.query('SELECT 1');
    return true;
  } catch {
    return false;
  }
}
