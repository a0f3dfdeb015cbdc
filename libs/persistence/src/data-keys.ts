import { randomUUID } from 'node:crypto';
import type { Queryable } from './database';
import { DataSource, EntityManager, QueryRunner } from 'typeorm';
import { DecryptionError, generateDataKey, KeyProvider, openWithDataKey, sealWithDataKey } from '@mission/crypto';
import { currentTenant } from '@mission/tenant-context';
import { serviceRoleName } from './row-level-security';

/**
 * DDL of a service's data-key table, for its migrations: each tenant's data keys, wrapped by the
 * KEK with the schema, tenant and key id as context. Wrapped keys are ciphertext that only the KEK
 * opens, and a row copied to another tenant does not unwrap, so the table needs no row-level
 * security: the outbox relay and the re-wrap command read it outside any tenant.
 */
export function dataKeysTableSql(schema: string): string[] {
  return [
    `CREATE TABLE "${schema}".data_keys (
      id uuid PRIMARY KEY,
      tenant_id uuid NOT NULL,
      kek_id text NOT NULL,
      wrapped text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT clock_timestamp()
    )`,
    `CREATE INDEX data_keys_tenant_created ON "${schema}".data_keys (tenant_id, created_at DESC)`,
  ];
}

/**
 * A service migration's step: its data-key table, to which the service role may add keys and
 * which it may re-wrap, but never delete from: a deleted key is every row it sealed, lost.
 */
export async function createDataKeysTable(queryRunner: QueryRunner, schema: string): Promise<void> {
  for (const statement of dataKeysTableSql(schema)) await queryRunner.query(statement);
  await queryRunner.query(`REVOKE DELETE, TRUNCATE ON "${schema}".data_keys FROM "${serviceRoleName(schema)}"`);
}

/** A sealed value as stored: `enc1.<data key id>.<base64url of iv ‖ ciphertext ‖ tag>`. */
const SEALED_PREFIX = 'enc1.';
const UUID_LENGTH = 36;
const COMMA = 0x2c;

export function isSealed(value: unknown): value is string {
  return typeof value === 'string' && value.startsWith(SEALED_PREFIX);
}

/** The record a ciphertext belongs to: bound into it, so it cannot be moved to another row, column or tenant. */
export interface SealedRecord {
  readonly table: string;
  readonly id: string;
}

/** How long a tenant's newest data key is used for writes without looking again. */
const NEWEST_KEY_TTL_MS = 60_000;

/**
 * How long a data key seals new records before the tenant's next write makes another (30 days).
 * Older keys keep opening what they sealed. AES-GCM with random 96-bit IVs stays within its bound
 * of 2^32 encryptions per key for any tenant writing fewer than about 1,600 records a second.
 */
export const DATA_KEY_MAX_AGE_MS = 30 * 24 * 3600 * 1000;

interface DataKey {
  readonly id: string;
  readonly key: Buffer;
}

/**
 * Encrypts a service's tenant payloads at rest (envelope encryption, AES-256-GCM): data keys per
 * tenant in `<schema>.data_keys`, the first made on the tenant's first write and a fresh one once
 * the newest is older than `maxKeyAgeMs` (30 days), each wrapped by the KEK; a record names the
 * key that sealed it, so older keys keep opening what they sealed. The tenant
 * comes from the context (a query outside a tenant throws) and, with the schema, table and record
 * id, is bound into every ciphertext: one copied to another tenant's row fails to open, loudly.
 * Unwrapped keys are cached by id (they never change; a KEK rotation only re-wraps them).
 */
export class RecordCipher {
  private readonly unwrapped = new Map<string, Promise<Buffer>>();
  /**
   * Each tenant's newest data key as last read from the database (committed, so never one a
   * rolled-back transaction made), for a minute: writes need no lookup per record.
   */
  private readonly newest = new Map<string, { readonly id: string; readonly kekId: string; readonly wrapped: string; readonly until: number; readonly retiresAt: number }>();
  /**
   * Keys made inside a transaction not yet committed, by that transaction's manager: used again
   * by its later writes, never remembered past it (it may roll back), and never confused with a
   * committed key when the same transaction looks it up.
   */
  private readonly madeIn = new WeakMap<EntityManager, Map<string, DataKey>>();

  constructor(
    private readonly schema: string,
    private readonly provider: KeyProvider,
    private readonly cacheSize = 10_000,
    /** A data key older than this seals nothing new: the tenant's next write makes a fresh one. */
    private readonly maxKeyAgeMs = DATA_KEY_MAX_AGE_MS,
  ) {}

  /** Seals `value` (as JSON) for the current tenant's record, within the caller's transaction. */
  async seal(manager: EntityManager, record: SealedRecord, value: unknown): Promise<string> {
    const [sealed] = await this.sealAll(manager, [{ record, value }]);
    return sealed as string;
  }

  /** Seals many values of the current tenant under one data-key lookup (a document's passages, say), in order. */
  async sealAll(manager: EntityManager, items: ReadonlyArray<{ readonly record: SealedRecord; readonly value: unknown }>): Promise<string[]> {
    const { prefix, sealed } = await this.sealEach(manager, items);
    return sealed.map((bytes) => `${prefix}${bytes.toString('base64url')}`);
  }

  /**
   * sealAll's texts joined by commas, as UTF-8 bytes: for a statement that takes them as one text
   * parameter and splits it (`string_to_array($n::text, ',')`). Each text is written once, into
   * the one buffer: no string per sealed text but its base64, no joined string, no copy of it to
   * encode for the wire (a Brain document's passages are about its size again, several times over
   * otherwise). A sealed text is `enc1.`, a key id and base64url: never a comma.
   */
  async sealAllJoined(manager: EntityManager, items: ReadonlyArray<{ readonly record: SealedRecord; readonly value: unknown }>): Promise<Buffer> {
    const { prefix, sealed } = await this.sealEach(manager, items);
    // Written as latin1 below, and split at commas by the statement: a key id is a UUID, nothing else.
    if (!/^[0-9a-f-]{36}\.$/.test(prefix.slice(SEALED_PREFIX.length))) throw new Error('A data key id that is not a UUID');
    let size = Math.max(0, sealed.length - 1);
    for (const bytes of sealed) size += prefix.length + Math.ceil((bytes.length * 4) / 3);
    const joined = Buffer.allocUnsafe(size);
    let at = 0;
    for (const [index, bytes] of sealed.entries()) {
      if (index > 0) joined[at++] = COMMA;
      at += joined.write(prefix, at, 'latin1');
      at += joined.write(bytes.toString('base64url'), at, 'latin1');
    }
    if (at !== size) throw new Error(`Sealed texts took ${at} bytes, not the ${size} counted`);
    return joined;
  }

  /** Each value sealed (`iv ‖ ciphertext ‖ tag`) under the tenant's current data key, and the prefix that names the key in a sealed text. */
  private async sealEach(
    manager: EntityManager,
    items: ReadonlyArray<{ readonly record: SealedRecord; readonly value: unknown }>,
  ): Promise<{ readonly prefix: string; readonly sealed: Buffer[] }> {
    const { tenantId } = currentTenant();
    const dataKey = await this.currentKey(manager, tenantId);
    return {
      prefix: `${SEALED_PREFIX}${dataKey.id}.`,
      sealed: items.map(({ record, value }) => sealWithDataKey(dataKey.key, Buffer.from(JSON.stringify(value), 'utf8'), this.context(tenantId, record))),
    };
  }

  /** Opens what `seal` stored for this tenant's record; throws DecryptionError for anything else. */
  async open<T>(manager: Queryable, record: SealedRecord, sealed: string, tenantId: string = currentTenant().tenantId): Promise<T> {
    if (!isSealed(sealed) || sealed.charAt(SEALED_PREFIX.length + UUID_LENGTH) !== '.') throw new DecryptionError('Not a sealed value');
    const keyId = sealed.slice(SEALED_PREFIX.length, SEALED_PREFIX.length + UUID_LENGTH);
    const key = await this.keyById(manager, tenantId, keyId);
    const plaintext = openWithDataKey(key, Buffer.from(sealed.slice(SEALED_PREFIX.length + UUID_LENGTH + 1), 'base64url'), this.context(tenantId, record));
    return JSON.parse(plaintext.toString('utf8')) as T;
  }

  /**
   * Re-wraps every data key not wrapped by the current KEK (after a KEK rotation), data untouched.
   * Returns how many keys were re-wrapped.
   */
  async rewrapAll(dataSource: DataSource): Promise<number> {
    const rows: Array<{ id: string; tenant_id: string; kek_id: string; wrapped: string }> = await dataSource.query(
      `SELECT id, tenant_id, kek_id, wrapped FROM "${this.schema}".data_keys WHERE kek_id <> $1 ORDER BY created_at`,
      [this.provider.currentKekId],
    );
    for (const row of rows) {
      const context = this.wrapContext(row.tenant_id, row.id);
      const key = await this.provider.unwrap({ kekId: row.kek_id, wrapped: row.wrapped }, context);
      const rewrapped = await this.provider.wrap(key, context);
      await dataSource.query(`UPDATE "${this.schema}".data_keys SET kek_id = $2, wrapped = $3 WHERE id = $1 AND kek_id = $4`, [
        row.id,
        rewrapped.kekId,
        rewrapped.wrapped,
        row.kek_id,
      ]);
    }
    return rows.length;
  }

  /** The tenant's newest data key, or a new one written in the caller's transaction (so it commits, or vanishes, with the data it sealed). */
  private async currentKey(manager: EntityManager, tenantId: string): Promise<DataKey> {
    const made = this.madeIn.get(manager)?.get(tenantId);
    if (made) return made;
    const known = this.newest.get(tenantId);
    const now = Date.now();
    if (known && known.until > now && known.retiresAt > now) return { id: known.id, key: await this.unwrap(known.id, tenantId, known.kekId, known.wrapped) };
    const [row]: Array<{ id: string; kek_id: string; wrapped: string; age_ms: number }> = await manager.query(
      `SELECT id, kek_id, wrapped, (extract(epoch FROM clock_timestamp() - created_at) * 1000)::float8 AS age_ms
       FROM "${this.schema}".data_keys WHERE tenant_id = $1 ORDER BY created_at DESC LIMIT 1`,
      [tenantId],
    );
    // The newest key while it is young enough; past its age (measured by the database's clock) a new one is made below.
    if (row && row.age_ms < this.maxKeyAgeMs) {
      if (this.newest.size >= this.cacheSize) this.newest.delete(this.newest.keys().next().value as string);
      this.newest.set(tenantId, { id: row.id, kekId: row.kek_id, wrapped: row.wrapped, until: now + NEWEST_KEY_TTL_MS, retiresAt: now + (this.maxKeyAgeMs - row.age_ms) });
      return { id: row.id, key: await this.unwrap(row.id, tenantId, row.kek_id, row.wrapped) };
    }
    this.newest.delete(tenantId);
    const id = randomUUID();
    const key = generateDataKey();
    const wrapped = await this.provider.wrap(key, this.wrapContext(tenantId, id));
    await manager.query(`INSERT INTO "${this.schema}".data_keys (id, tenant_id, kek_id, wrapped) VALUES ($1, $2, $3, $4)`, [id, tenantId, wrapped.kekId, wrapped.wrapped]);
    const madeHere = this.madeIn.get(manager) ?? new Map<string, DataKey>();
    madeHere.set(tenantId, { id, key });
    this.madeIn.set(manager, madeHere);
    return { id, key };
  }

  private async keyById(manager: Queryable, tenantId: string, keyId: string): Promise<Buffer> {
    const cached = this.unwrapped.get(this.cacheKey(tenantId, keyId));
    if (cached) return cached;
    const [row]: Array<{ kek_id: string; wrapped: string }> = await manager.query(`SELECT kek_id, wrapped FROM "${this.schema}".data_keys WHERE id = $1 AND tenant_id = $2`, [
      keyId,
      tenantId,
    ]);
    if (!row) throw new DecryptionError(`No data key ${keyId} for this tenant`);
    return this.unwrap(keyId, tenantId, row.kek_id, row.wrapped);
  }

  private unwrap(keyId: string, tenantId: string, kekId: string, wrapped: string): Promise<Buffer> {
    const cacheKey = this.cacheKey(tenantId, keyId);
    const cached = this.unwrapped.get(cacheKey);
    if (cached) return cached;
    const pending = this.provider.unwrap({ kekId, wrapped }, this.wrapContext(tenantId, keyId)).catch((error: unknown) => {
      this.unwrapped.delete(cacheKey);
      throw error instanceof DecryptionError ? error : new DecryptionError(error instanceof Error ? error.message : String(error));
    });
    if (this.unwrapped.size >= this.cacheSize) this.unwrapped.delete(this.unwrapped.keys().next().value as string);
    this.unwrapped.set(cacheKey, pending);
    return pending;
  }

  private cacheKey(tenantId: string, keyId: string): string {
    return `${tenantId}/${keyId}`;
  }

  private wrapContext(tenantId: string, keyId: string): string {
    return `record|${this.schema}|${tenantId}|${keyId}`;
  }

  private context(tenantId: string, record: SealedRecord): string {
    return `${this.schema}.${record.table}|${tenantId}|${record.id}`;
  }
}

/** Opens the schema's database, re-wraps its data keys under the provider's current KEK, closes it. */
export async function rewrapDataKeys(open: () => Promise<DataSource>, schema: string, provider: KeyProvider): Promise<number> {
  const dataSource = await open();
  try {
    return await new RecordCipher(schema, provider).rewrapAll(dataSource);
  } finally {
    await dataSource.destroy();
  }
}

/**
 * What a service's process does to its schema besides serving (`--migrate-only`, `--rewrap-data-keys`),
 * given how it opens its database: opening migrates it.
 */
export function schemaMaintenance(
  open: (databaseUrl: string) => Promise<DataSource>,
  schema: string,
): { migrate(databaseUrl: string): Promise<void>; rewrapDataKeys(databaseUrl: string, keys: KeyProvider): Promise<number> } {
  return {
    migrate: async (databaseUrl) => {
      await (await open(databaseUrl)).destroy();
    },
    rewrapDataKeys: (databaseUrl, keys) => rewrapDataKeys(() => open(databaseUrl), schema, keys),
  };
}
