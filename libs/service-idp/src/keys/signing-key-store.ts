import type { DataSource, EntityManager } from 'typeorm';
import { decrypt, encrypt, KeyEncryptionKey } from '@mission/crypto';
import { generateSigningKey, parseSigningKey, SigningKey } from './idp-keys';
import { advance, initialKey, KeyState, KeyTimeline, planRotation, publishedOrder, RotationPolicy } from './key-rotation';

const LOCK = 'identity.signing_keys';

interface KeyRow {
  kid: string;
  private_jwk: string | null;
  state: KeyState;
  created_at: Date;
  activates_at: Date;
  retires_at: Date | null;
}

/** The provider's key set as of one load: what it signs with and publishes, and when to look again. */
export interface SigningKeySet {
  /** Private JWKs in provider order: the signing key first. */
  readonly keys: readonly SigningKey[];
  readonly timeline: readonly KeyTimeline[];
  /** The next planned transition (activation or retirement), if any. */
  readonly nextChangeAt: Date | undefined;
}

export type RotationResult =
  | { readonly rotated: true; readonly kid: string; readonly activatesAt: Date }
  | { readonly rotated: false; readonly reason: 'rotation_pending'; readonly pendingKid: string; readonly activatesAt: Date };

function timelineOf(row: KeyRow): KeyTimeline {
  return { kid: row.kid, state: row.state, createdAt: row.created_at, activatesAt: row.activates_at, retiresAt: row.retires_at };
}

/**
 * Signing keys in `identity.signing_keys`, private parts only as AES-256-GCM envelopes (the kid as
 * associated data, so a row's ciphertext cannot be passed off as another key's). Every change
 * runs in a transaction under an advisory lock: replicas advancing or rotating together take turns.
 */
export class SigningKeyStore {
  constructor(
    private readonly dataSource: DataSource,
    private readonly kek: KeyEncryptionKey,
    private readonly policy: RotationPolicy,
    private readonly now: () => Date = () => new Date(),
  ) {}

  /**
   * Makes sure a key signs: imports `legacy` keys (plain files of an earlier version) when the table
   * is empty, else generates the first key. Returns what was done.
   */
  async initialize(legacy?: readonly SigningKey[]): Promise<'existing' | 'imported' | 'generated'> {
    return this.locked(async (manager, rows) => {
      if (rows.length > 0) return 'existing';
      const now = this.now();
      const [first, ...rest] = legacy ?? [];
      if (first) {
        await this.insert(manager, first, initialKey(now));
        // Older keys of the file are kept published as retiring, in case tokens they signed are live.
        for (const key of rest)
          await this.insert(manager, key, { state: 'retiring', createdAt: now, activatesAt: now, retiresAt: new Date(now.getTime() + this.policy.retireAfterMs) });
        return 'imported';
      }
      await this.insert(manager, generateSigningKey(), initialKey(now));
      return 'generated';
    });
  }

  /** Adds a new key, published now and signing after the publish delay. One rotation at a time. */
  async rotate(): Promise<RotationResult> {
    return this.locked(async (manager, rows) => {
      const timeline = await this.applyDue(manager, rows.map(timelineOf));
      const now = this.now();
      const plan = planRotation(timeline, now, this.policy);
      if (!plan.ok) return { rotated: false, reason: plan.reason, pendingKid: plan.pendingKid, activatesAt: plan.activatesAt };
      const key = generateSigningKey();
      await this.insert(manager, key, plan.key);
      return { rotated: true, kid: key.kid, activatesAt: plan.key.activatesAt };
    });
  }

  /** Applies the transitions due now and returns the key set to serve. */
  async load(): Promise<SigningKeySet> {
    return this.locked(async (manager, rows) => {
      const timeline = await this.applyDue(manager, rows.map(timelineOf));
      const envelopes = new Map(rows.map((row) => [row.kid, row.private_jwk]));
      const keys = publishedOrder(timeline).map((kid) => this.open(kid, envelopes.get(kid) ?? null));
      const upcoming = timeline
        .flatMap((key) => (key.state === 'published' ? [key.activatesAt] : key.state === 'retiring' && key.retiresAt ? [key.retiresAt] : []))
        .sort((a, b) => a.getTime() - b.getTime());
      return { keys, timeline, nextChangeAt: upcoming[0] };
    });
  }

  private open(kid: string, envelope: string | null): SigningKey {
    if (envelope === null) throw new Error(`Signing key ${kid} has no private key stored`);
    const key = parseSigningKey(JSON.parse(decrypt(this.kek, envelope, kid).toString('utf8')));
    if (key.kid !== kid) throw new Error(`Signing key ${kid} holds the key ${key.kid}`);
    return key;
  }

  private async applyDue(manager: EntityManager, timeline: KeyTimeline[]): Promise<KeyTimeline[]> {
    const changes = advance(timeline, this.now(), this.policy);
    // The old signing key steps down before the new one signs (one signing key, enforced by an index).
    const ordered = [...changes].sort((a, b) => Number(a.state === 'signing') - Number(b.state === 'signing'));
    for (const key of ordered) {
      await manager.query(`UPDATE identity.signing_keys SET state = $2, retires_at = $3, private_jwk = CASE WHEN $2 = 'retired' THEN NULL ELSE private_jwk END WHERE kid = $1`, [
        key.kid,
        key.state,
        key.retiresAt,
      ]);
    }
    const byKid = new Map(changes.map((key) => [key.kid, key]));
    return timeline.map((key) => byKid.get(key.kid) ?? key);
  }

  private async insert(manager: EntityManager, key: SigningKey, timeline: Omit<KeyTimeline, 'kid'>): Promise<void> {
    await manager.query(`INSERT INTO identity.signing_keys (kid, private_jwk, state, created_at, activates_at, retires_at) VALUES ($1, $2, $3, $4, $5, $6)`, [
      key.kid,
      encrypt(this.kek, JSON.stringify(key), key.kid),
      timeline.state,
      timeline.createdAt,
      timeline.activatesAt,
      timeline.retiresAt,
    ]);
  }

  private locked<T>(work: (manager: EntityManager, rows: KeyRow[]) => Promise<T>): Promise<T> {
    return this.dataSource.transaction(async (manager) => {
      await manager.query('SELECT pg_advisory_xact_lock(hashtext($1))', [LOCK]);
      const rows: KeyRow[] = await manager.query(
        `SELECT kid, private_jwk, state, created_at, activates_at, retires_at FROM identity.signing_keys WHERE state <> 'retired' ORDER BY created_at`,
      );
      return work(manager, rows);
    });
  }
}
