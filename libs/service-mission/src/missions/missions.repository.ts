import { LRUCache } from 'lru-cache';
import { DataSource, EntityManager } from 'typeorm';
import { CursorPosition, FINAL_MISSION_STATUSES, isUuid, MissionStatus } from '@mission/contracts';
import { DecryptionError } from '@mission/crypto';
import { deferWrite, deleteInBatches, isSealed, type Queryable, RecordCipher, sqlStateOf, type SweepTask } from '@mission/persistence';
import { MissionContent, MissionEntity, MissionRow } from './mission.entity';

const TABLE = 'missions';

/** Every column of mission.missions, named as MissionRow's properties. */
const ROW_COLUMNS = `id, tenant_id AS "tenantId", status, sealed, title, objective, input, steps, metadata, result, error,
  created_at AS "createdAt", updated_at AS "updatedAt", completed_at AS "completedAt", next_check_at AS "nextCheckAt"`;
const IDEMPOTENCY_TABLE = 'idempotency_keys';

/** What the memory of known versions may hold by default: about 8 MiB of sealed content, at most 10,000 missions. */
export const KNOWN_VERSIONS_DEFAULTS = { maxBytes: 8 * 1024 * 1024, maxEntries: 10_000 } as const;

export interface KnownVersionsOptions {
  /** Upper bound of the remembered rows' sealed content (UTF-16 code units, about bytes); 0 turns the memory off. */
  readonly maxBytes?: number;
  readonly maxEntries?: number;
}

/** The SQLSTATE `mission.expect_one_row` raises: the row was not the version a change was worked out from. */
export const STALE_VERSION_CODE = 'MS409';

/** Whether `error` says a conditional save found the mission changed (see saveIfUnchanged). */
export function isStaleVersion(error: unknown): boolean {
  return sqlStateOf(error) === STALE_VERSION_CODE;
}

/** A version of a mission's row, named by its sealed content (sealed anew, with a fresh nonce, by every save). */
export interface KnownVersion {
  readonly row: MissionRow & { readonly sealed: string };
}

/**
 * The only code that reads or writes missions. Every read is filtered by tenant, and a mission's
 * content is sealed on the way in and opened on the way out (RecordCipher): the database holds
 * it only as ciphertext under the tenant's data key.
 */
export class MissionsRepository {
  /**
   * The last version of each unfinished mission this process wrote or read, by tenant and id: the
   * runner works a transition out from it and saves only if the row still holds it (one round trip
   * instead of a locked read first). Never trusted: a version written by a transaction that then
   * rolled back, or changed since by another replica, fails the save's check and the runner
   * decides again on the locked row. Bounded by entries and size; final missions are not kept.
   */
  private readonly known?: LRUCache<string, KnownVersion>;

  constructor(
    private readonly dataSource: DataSource,
    private readonly cipher: RecordCipher,
    options: KnownVersionsOptions = {},
  ) {
    const maxBytes = options.maxBytes ?? KNOWN_VERSIONS_DEFAULTS.maxBytes;
    if (!Number.isSafeInteger(maxBytes) || maxBytes < 0) throw new RangeError(`The known-versions memory must be a whole number of bytes, not ${maxBytes}`);
    if (maxBytes === 0) return;
    this.known = new LRUCache({
      max: options.maxEntries ?? KNOWN_VERSIONS_DEFAULTS.maxEntries,
      maxSize: maxBytes,
      maxEntrySize: maxBytes,
      sizeCalculation: (entry) => Math.max(1, entry.row.sealed.length),
    });
  }

  /** The version of the tenant's mission this process wrote or read last, if it kept one. */
  knownVersion(tenantId: string, id: string): KnownVersion | undefined {
    const entry = this.known?.get(versionKey(tenantId, id));
    return entry && entry.row.tenantId === tenantId ? entry : undefined;
  }

  /** The mission as the known version holds it (opened: decrypted under the tenant's data key). */
  async openVersion(manager: EntityManager, version: KnownVersion): Promise<MissionEntity> {
    return (await this.toEntity(manager, version.row)) as MissionEntity;
  }

  /** Keeps `row` as the mission's known version (sealed, not final), or forgets the mission. */
  private remember(row: MissionRow): void {
    if (!this.known) return;
    const key = versionKey(row.tenantId, row.id);
    if (row.sealed === null || FINAL_MISSION_STATUSES.includes(row.status)) this.known.delete(key);
    else this.known.set(key, { row: { ...row, sealed: row.sealed } });
  }

  /**
   * The hot statements (insert, read, lock, save) are fixed SQL rather than built by TypeORM on
   * every call: building them was a tenth of the service's work per mission. Columns are named as
   * MissionRow's properties, so a row maps like an entity TypeORM loaded; the plaintext columns of
   * rows written before sealing are written empty. Writes go with the transaction's next
   * statement or its commit (deferWrite).
   */
  async insert(manager: EntityManager, mission: MissionEntity): Promise<void> {
    const row = await this.toRow(manager, mission);
    this.remember(row);
    await deferWrite(
      manager,
      `INSERT INTO mission.missions (id, tenant_id, status, sealed, created_at, updated_at, completed_at, next_check_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
      [row.id, row.tenantId, row.status, row.sealed, row.createdAt, row.updatedAt, row.completedAt, row.nextCheckAt],
    );
  }

  /** A malformed id cannot exist, so it is simply not found (no query). */
  async findForTenant(manager: EntityManager, tenantId: string, id: string): Promise<MissionEntity | null> {
    if (!isUuid(id)) return null;
    return this.toEntity(manager, await manager.findOne(MissionRow, { where: { tenantId, id } }));
  }

  /**
   * The same as findForTenant, as one statement of its own (for tenantReader: one round trip).
   * Columns are named as MissionRow's properties, so the row maps like an entity TypeORM loaded.
   */
  async read(reader: Queryable, tenantId: string, id: string): Promise<MissionEntity | null> {
    if (!isUuid(id)) return null;
    const [row]: MissionRow[] = await reader.query(`SELECT ${ROW_COLUMNS} FROM mission.missions WHERE tenant_id = $1 AND id = $2`, [tenantId, id]);
    if (row) this.remember(row);
    return this.toEntity(reader, row ?? null);
  }

  async lockForTenant(manager: EntityManager, tenantId: string, id: string): Promise<MissionEntity | null> {
    if (!isUuid(id)) return null;
    const [row]: MissionRow[] = await manager.query(`SELECT ${ROW_COLUMNS} FROM mission.missions WHERE tenant_id = $1 AND id = $2 FOR UPDATE`, [tenantId, id]);
    if (row) this.remember(row);
    else this.known?.delete(versionKey(tenantId, id));
    return this.toEntity(manager, row ?? null);
  }

  async save(manager: EntityManager, mission: MissionEntity): Promise<void> {
    const row = await this.toRow(manager, mission);
    this.remember(row);
    await deferWrite(manager, `UPDATE mission.missions SET ${SAVED_COLUMNS} WHERE tenant_id = $1 AND id = $2`, [
      row.tenantId,
      row.id,
      row.status,
      row.sealed,
      row.updatedAt,
      row.completedAt,
      row.nextCheckAt,
    ]);
  }

  /**
   * save, on the condition that the row still holds `version`'s sealed content: otherwise
   * `mission.expect_one_row` fails the statement, and with it the transaction, when it is sent
   * (with the commit, as a deferred write). isStaleVersion tells that failure apart. Every save
   * seals anew (a fresh nonce), so the sealed text names the version; the one write that leaves it
   * as it is, markRunning, only turns `queued` into `running`, which no transition tells apart (a
   * step's reply, a decision or a resumption treats a queued mission as a running one and leaves
   * it at least running), so the status is not part of the condition: a reply handled while the
   * mission's `mission.queued` is still being handled does not fall back to the locked row.
   */
  async saveIfUnchanged(manager: EntityManager, mission: MissionEntity, version: KnownVersion): Promise<void> {
    const row = await this.toRow(manager, mission);
    this.remember(row);
    await deferWrite(
      manager,
      `WITH saved AS (UPDATE mission.missions SET ${SAVED_COLUMNS} WHERE tenant_id = $1 AND id = $2 AND sealed = $8 RETURNING 1)
       SELECT mission.expect_one_row(count(*)) FROM saved`,
      [row.tenantId, row.id, row.status, row.sealed, row.updatedAt, row.completedAt, row.nextCheckAt, version.row.sealed],
    );
  }

  /** A queued mission becomes running (its content unchanged); any other is left as it is. Goes with the commit. */
  async markRunning(manager: EntityManager, tenantId: string, id: string, now: Date): Promise<void> {
    if (!isUuid(id)) return;
    const [running, queued]: MissionStatus[] = ['running', 'queued'];
    await deferWrite(manager, `UPDATE mission.missions SET status = $3, updated_at = $4 WHERE tenant_id = $1 AND id = $2 AND status = $5`, [tenantId, id, running, now, queued]);
  }

  /** The row to store: metadata in clear, content sealed, the plaintext columns of older rows emptied. */
  private async toRow(manager: EntityManager, mission: MissionEntity): Promise<MissionRow> {
    const content: MissionContent = {
      title: mission.title,
      objective: mission.objective,
      input: mission.input,
      steps: mission.steps,
      metadata: mission.metadata,
      result: mission.result,
      error: mission.error,
      grantedScopes: mission.grantedScopes,
    };
    return {
      id: mission.id,
      tenantId: mission.tenantId,
      status: mission.status,
      sealed: await this.cipher.seal(manager, { table: TABLE, id: mission.id }, content),
      title: null,
      objective: null,
      input: null,
      steps: null,
      metadata: null,
      result: null,
      error: null,
      createdAt: mission.createdAt,
      updatedAt: mission.updatedAt,
      completedAt: mission.completedAt,
      nextCheckAt: mission.nextCheckAt ?? null,
    };
  }

  private async toEntity(manager: Queryable, row: MissionRow | null): Promise<MissionEntity | null> {
    if (!row) return null;
    const content: MissionContent = row.sealed
      ? await this.cipher.open<MissionContent>(manager, { table: TABLE, id: row.id }, row.sealed)
      : {
          title: row.title ?? '',
          objective: row.objective ?? '',
          input: row.input,
          steps: row.steps ?? [],
          metadata: row.metadata ?? {},
          result: row.result,
          error: row.error,
        };
    return Object.assign(new MissionEntity(), {
      id: row.id,
      tenantId: row.tenantId,
      status: row.status,
      ...content,
      grantedScopes: content.grantedScopes ?? null,
      createdAt: row.createdAt,
      updatedAt: row.updatedAt,
      completedAt: row.completedAt,
      nextCheckAt: row.nextCheckAt,
    });
  }

  /**
   * Missions a runner must pick up again after a restart (every tenant's, oldest first): the one
   * cross-tenant read, through a SECURITY DEFINER function that returns ids and tenants only.
   */
  async findUnfinished(limit: number): Promise<Array<Pick<MissionEntity, 'id' | 'tenantId'>>> {
    const rows: Array<{ id: string; tenant_id: string }> = await this.dataSource.query(`SELECT id, tenant_id FROM mission.unfinished_missions($1)`, [limit]);
    return rows.map((row) => ({ id: row.id, tenantId: row.tenant_id }));
  }

  /** Newest first, optionally of one status, after `before` in (created_at, id) order; one extra row tells whether more follow. */
  /** Queued or running missions whose step reply is overdue (every tenant's), through a SECURITY DEFINER function. */
  async findDue(limit: number): Promise<Array<Pick<MissionEntity, 'id' | 'tenantId'>>> {
    const rows: Array<{ id: string; tenant_id: string }> = await this.dataSource.query(`SELECT id, tenant_id FROM mission.missions_due($1)`, [limit]);
    return rows.map((row) => ({ id: row.id, tenantId: row.tenant_id }));
  }

  async page(manager: EntityManager, tenantId: string, limit: number, status?: MissionStatus, before?: CursorPosition): Promise<MissionEntity[]> {
    const query = manager
      .getRepository(MissionRow)
      .createQueryBuilder('m')
      .where('m.tenant_id = :tenantId', { tenantId })
      .orderBy('m.created_at', 'DESC')
      .addOrderBy('m.id', 'DESC')
      .limit(limit + 1);
    if (status) query.andWhere('m.status = :status', { status });
    if (before) query.andWhere('(m.created_at, m.id) < (:at, :id)', { at: before.at, id: before.id });
    const rows = await query.getMany();
    const missions: MissionEntity[] = [];
    // One at a time: a key not cached yet is read on the transaction's one connection.
    for (const row of rows) missions.push((await this.toEntity(manager, row)) as MissionEntity);
    return missions;
  }

  /**
   * The mission an Idempotency-Key produced within the last `ttlHours`, with the fingerprint of its
   * request. Both are stored sealed together: a bare hash of a request would let anyone holding
   * the database confirm a guess of what a tenant submitted, and a mission id swapped in the clear
   * column no longer matches the sealed one (the read fails instead of answering with another
   * mission). Rows written before fingerprints were sealed (at most `ttlHours` old) hold the bare
   * hash of the validated request, and are returned as `legacy`.
   */
  async findIdempotencyKey(manager: EntityManager, tenantId: string, key: string, ttlHours: number): Promise<{ requestHash: string; missionId: string; legacy: boolean } | null> {
    const rows: Array<{ request_hash: string; mission_id: string }> = await manager.query(
      `SELECT request_hash, mission_id FROM mission.idempotency_keys
       WHERE tenant_id = $1 AND key = $2 AND created_at > now() - make_interval(hours => $3)`,
      [tenantId, key, ttlHours],
    );
    const row = rows[0];
    if (!row) return null;
    if (!isSealed(row.request_hash)) return { requestHash: row.request_hash, missionId: row.mission_id, legacy: true };
    const sealed = await this.cipher.open<{ requestHash: string; missionId: string }>(manager, { table: IDEMPOTENCY_TABLE, id: key }, row.request_hash, tenantId);
    if (sealed.missionId !== row.mission_id) throw new DecryptionError(`The mission of Idempotency-Key row ${key} does not match its sealed record`);
    return { requestHash: sealed.requestHash, missionId: sealed.missionId, legacy: false };
  }

  /** Records (or, once expired, replaces) what an Idempotency-Key stands for: its request fingerprint and mission, sealed. */
  async saveIdempotencyKey(manager: EntityManager, tenantId: string, key: string, requestHash: string, missionId: string, now: Date): Promise<void> {
    const sealed = await this.cipher.seal(manager, { table: IDEMPOTENCY_TABLE, id: key }, { requestHash, missionId });
    await deferWrite(
      manager,
      `INSERT INTO mission.idempotency_keys (tenant_id, key, request_hash, mission_id, created_at) VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT (tenant_id, key) DO UPDATE SET request_hash = EXCLUDED.request_hash, mission_id = EXCLUDED.mission_id, created_at = EXCLUDED.created_at`,
      [tenantId, key, sealed, missionId, now],
    );
  }

  /**
   * Claims an Idempotency-Key for the rest of the transaction. False while another request with
   * the same key is still in its transaction (the caller answers 409).
   */
  async tryClaimIdempotencyKey(manager: EntityManager, tenantId: string, key: string): Promise<boolean> {
    const [row] = await manager.query('SELECT pg_try_advisory_xact_lock(hashtext($1), hashtext($2)) AS claimed', [tenantId, key]);
    return row.claimed === true;
  }
}

/** Idempotency-Keys past their life (`ttlHours`), across tenants, through the migration's SECURITY DEFINER function. */
export function expiredIdempotencyKeysSweep(ttlHours: number): SweepTask {
  return {
    name: 'mission.idempotency_keys',
    run: (dataSource) => deleteInBatches(dataSource, 'SELECT mission.delete_expired_idempotency_keys($1, $2) AS deleted', [ttlHours]),
  };
}

/** The columns a save writes ($3 to $7), emptying the plaintext columns of rows written before sealing. */
const SAVED_COLUMNS = `status = $3, sealed = $4, title = NULL, objective = NULL, input = NULL, steps = NULL, metadata = NULL, result = NULL, error = NULL,
  updated_at = $5, completed_at = $6, next_check_at = $7`;

// Ids are UUIDs and tenant ids never contain a NUL: the pair cannot collide with another.
const versionKey = (tenantId: string, id: string): string => `${tenantId}\u0000${id}`;
