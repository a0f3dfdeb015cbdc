import { createHash } from 'node:crypto';
import type { DataSource } from 'typeorm';
import type { Adapter, AdapterConstructor, AdapterPayload } from 'oidc-provider';
import { ClientDirectory } from './client-directory';

/** How the id of an artefact is kept: its SHA-256, so a read of the table yields no usable code or token. */
export function artefactKey(model: string, id: string): string {
  return createHash('sha256').update(`${model}\u0000${id}`).digest('base64url');
}

/**
 * Models whose id is a bearer credential (a code or an opaque token): their payload is stored
 * without it. Sessions keep theirs, since a session is also found by uid and needs its id back.
 */
const CREDENTIAL_MODELS = new Set([
  'AuthorizationCode',
  'RefreshToken',
  'AccessToken',
  'ClientCredentials',
  'DeviceCode',
  'BackchannelAuthenticationRequest',
  'PushedAuthorizationRequest',
]);

/**
 * A code or refresh token presented again after it was consumed (or by the loser of a race for
 * it): oidc-provider answers it as the OAuth error it names (`expose`), 400 `invalid_grant`.
 */
export class CredentialReusedError extends Error {
  readonly expose = true;
  readonly statusCode = 400;
  readonly error_description: string;

  constructor(model: string) {
    super('invalid_grant');
    this.name = 'CredentialReusedError';
    this.error_description = model === 'AuthorizationCode' ? 'authorization code already consumed' : `${model === 'RefreshToken' ? 'refresh token' : model} already used`;
  }
}

/** Rows deleted per sweepExpired() call. */
const SWEEP_BATCH = 1_000;

/**
 * oidc-provider's storage on PostgreSQL (`identity.oidc_artefacts`), so sessions, grants, codes
 * and refresh tokens survive restarts and are shared by replicas; consumption and revocation by
 * grant (refresh-token reuse detection revokes the whole family) are single statements. Clients
 * come from the ClientDirectory and are read-only here.
 */
export function createPostgresAdapter(dataSource: DataSource, clients: ClientDirectory): AdapterConstructor {
  /** Every artefact of a grant (its tokens and codes, of every model) and the grant itself. */
  const revokeGrant = async (grantId: string): Promise<void> => {
    await dataSource.query(`DELETE FROM identity.oidc_artefacts WHERE grant_id = $1 OR (model = 'Grant' AND key = $2)`, [grantId, artefactKey('Grant', grantId)]);
  };

  return class PostgresOidcAdapter implements Adapter {
    constructor(private readonly model: string) {}

    async upsert(id: string, payload: AdapterPayload, expiresIn?: number): Promise<void> {
      this.refuseClientWrites();
      const { jti: _id, ...withoutId } = payload;
      const stored = CREDENTIAL_MODELS.has(this.model) ? withoutId : payload;
      await dataSource.query(
        `INSERT INTO identity.oidc_artefacts (model, key, payload, grant_id, uid, user_code, expires_at)
         VALUES ($1, $2, $3, $4, $5, $6, CASE WHEN $7::int IS NULL THEN NULL ELSE clock_timestamp() + make_interval(secs => $7::int) END)
         ON CONFLICT (model, key) DO UPDATE SET payload = EXCLUDED.payload, grant_id = EXCLUDED.grant_id, uid = EXCLUDED.uid,
           user_code = EXCLUDED.user_code, expires_at = EXCLUDED.expires_at`,
        [
          this.model,
          artefactKey(this.model, id),
          JSON.stringify(stored),
          typeof payload.grantId === 'string' ? payload.grantId : null,
          typeof payload.uid === 'string' ? payload.uid : null,
          typeof payload.userCode === 'string' ? payload.userCode : null,
          expiresIn === undefined ? null : Math.max(1, Math.ceil(expiresIn)),
        ],
      );
    }

    async find(id: string): Promise<AdapterPayload | undefined> {
      if (this.model === 'Client') return clients.find(id) as Promise<AdapterPayload | undefined>;
      if (id.length === 0 || id.length > 1_000 || id.includes('\u0000')) return undefined;
      const rows: Array<{ payload: AdapterPayload }> = await dataSource.query(
        `SELECT payload FROM identity.oidc_artefacts WHERE model = $1 AND key = $2 AND (expires_at IS NULL OR expires_at > clock_timestamp())`,
        [this.model, artefactKey(this.model, id)],
      );
      return rows[0] ? { ...rows[0].payload, jti: id } : undefined;
    }

    async findByUid(uid: string): Promise<AdapterPayload | undefined> {
      return this.findWhere('uid', uid);
    }

    async findByUserCode(userCode: string): Promise<AdapterPayload | undefined> {
      return this.findWhere('user_code', userCode);
    }

    /**
     * Consumes a code or refresh token once: the row is marked only if it was not consumed yet, in
     * one statement, so of two requests racing with the same credential exactly one wins. The
     * other is a reuse: every artefact of its grant, and the grant, are revoked (the winner's new
     * tokens with them), and it is answered `invalid_grant`.
     */
    async consume(id: string): Promise<void> {
      this.refuseClientWrites();
      const key = artefactKey(this.model, id);
      const [{ claimed }]: Array<{ claimed: number }> = await dataSource.query(
        `WITH claimed AS (
           UPDATE identity.oidc_artefacts SET payload = payload || jsonb_build_object('consumed', floor(extract(epoch FROM clock_timestamp()))::bigint)
           WHERE model = $1 AND key = $2 AND payload->'consumed' IS NULL AND (expires_at IS NULL OR expires_at > clock_timestamp())
           RETURNING 1)
         SELECT count(*)::int AS claimed FROM claimed`,
        [this.model, key],
      );
      if (claimed === 1) return;
      const [row]: Array<{ grant_id: string | null }> = await dataSource.query(`SELECT grant_id FROM identity.oidc_artefacts WHERE model = $1 AND key = $2`, [this.model, key]);
      if (row?.grant_id) await revokeGrant(row.grant_id);
      throw new CredentialReusedError(this.model);
    }

    async destroy(id: string): Promise<void> {
      this.refuseClientWrites();
      await dataSource.query(`DELETE FROM identity.oidc_artefacts WHERE model = $1 AND key = $2`, [this.model, artefactKey(this.model, id)]);
    }

    async revokeByGrantId(grantId: string): Promise<void> {
      await dataSource.query(`DELETE FROM identity.oidc_artefacts WHERE model = $1 AND grant_id = $2`, [this.model, grantId]);
    }

    /** Lookups by uid or user code: the row's own id is not known, so the payload comes back with the one it was saved under. */
    private async findWhere(column: 'uid' | 'user_code', value: string): Promise<AdapterPayload | undefined> {
      if (value.includes('\u0000')) return undefined;
      const rows: Array<{ payload: AdapterPayload }> = await dataSource.query(
        `SELECT payload FROM identity.oidc_artefacts WHERE model = $1 AND ${column} = $2 AND (expires_at IS NULL OR expires_at > clock_timestamp()) LIMIT 1`,
        [this.model, value],
      );
      return rows[0]?.payload;
    }

    private refuseClientWrites(): void {
      if (this.model === 'Client') throw new Error('Clients are provisioned through the identity service, not through the OIDC provider');
    }
  };
}

/** Deletes artefacts whose expiry has passed; returns how many. */
export async function sweepExpired(dataSource: DataSource): Promise<number> {
  const [, count] = (await dataSource.query(
    `DELETE FROM identity.oidc_artefacts WHERE ctid IN (SELECT ctid FROM identity.oidc_artefacts WHERE expires_at < clock_timestamp() LIMIT $1)`,
    [SWEEP_BATCH],
  )) as [unknown, number];
  return count;
}
