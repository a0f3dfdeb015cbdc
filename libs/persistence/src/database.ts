import { DataSource, EntityManager, EntitySchema, MigrationExecutor, MixedList } from 'typeorm';
import { currentTenant } from '@mission/tenant-context';

export interface ServiceDatabaseOptions {
  /** postgres:// URL. */
  readonly url: string;
  /** The service's own schema; nothing else is touched. */
  readonly schema: string;
  // eslint-disable-next-line @typescript-eslint/no-unsafe-function-type
  readonly entities: MixedList<Function | string | EntitySchema>;
  // eslint-disable-next-line @typescript-eslint/no-unsafe-function-type
  readonly migrations: MixedList<Function | string>;
  readonly applicationName: string;
  readonly poolSize?: number;
}

const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

/**
 * Opens the DataSource of one service's schema and brings the schema up to date with its
 * migrations (never `synchronize`). Replicas starting together take turns through an advisory
 * lock, so each migration runs exactly once.
 */
export async function openServiceDatabase(options: ServiceDatabaseOptions): Promise<DataSource> {
  if (!SCHEMA_NAME.test(options.schema)) throw new Error(`Invalid schema name: ${options.schema}`);
  const dataSource = new DataSource({
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
    extra: { max: options.poolSize ?? 10, connectionTimeoutMillis: 5_000 },
  });
  await dataSource.initialize();
  const lock = dataSource.createQueryRunner();
  try {
    await lock.connect();
    await lock.query('SELECT pg_advisory_lock(hashtext($1))', [`migrations:${options.schema}`]);
    await lock.query(`CREATE SCHEMA IF NOT EXISTS "${options.schema}"`);
    // On the connection that holds the lock: a second one from the pool would never come with
    // a pool of one, and the start would time out.
    const migrations = new MigrationExecutor(dataSource, lock);
    migrations.transaction = 'each';
    await migrations.executePendingMigrations();
  } catch (error) {
    await dataSource.destroy();
    throw error;
  } finally {
    await lock.query('SELECT pg_advisory_unlock(hashtext($1))', [`migrations:${options.schema}`]).catch(() => undefined);
    await lock.release();
  }
  return dataSource;
}

/**
 * Runs `work` in a transaction bound to the current tenant: `app.tenant_id` is set for the
 * transaction, which row-level security policies read. Throws without a tenant context.
 */
export async function tenantTransaction<T>(dataSource: DataSource, work: (manager: EntityManager) => Promise<T>): Promise<T> {
  const { tenantId } = currentTenant();
  return dataSource.transaction(async (manager) => {
    await manager.query(`SELECT set_config('app.tenant_id', $1, true)`, [tenantId]);
    return work(manager);
  });
}

export async function pingDatabase(dataSource: DataSource): Promise<boolean> {
  try {
    await dataSource.query('SELECT 1');
    return true;
  } catch {
    return false;
  }
}
