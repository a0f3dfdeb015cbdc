import { ACCESS_TOKEN_TTL_SECONDS } from '../oidc/token-policy';

/**
 * Life of a signing key:
 * - `published`: in the JWKS, signs nothing yet, so every verifier's cached JWKS learns it first;
 * - `signing`: the one key that signs (first in the provider's key set), still published;
 * - `retiring`: no longer signs, still published until the last token it signed has expired;
 * - `retired`: out of the JWKS; its private key is never loaded again.
 */
export type KeyState = 'published' | 'signing' | 'retiring' | 'retired';
export const KEY_STATES: readonly KeyState[] = ['published', 'signing', 'retiring', 'retired'];

export interface KeyTimeline {
  readonly kid: string;
  readonly state: KeyState;
  readonly createdAt: Date;
  /** When a published key starts signing (for the first key: its creation). */
  readonly activatesAt: Date;
  /** Set when the key stops signing: when it leaves the JWKS. */
  readonly retiresAt: Date | null;
}

/** Clock skew the gateway accepts on `exp` (token-verifier). */
export const VERIFIER_SKEW_SECONDS = 30;
/** The gateway caches the JWKS for this long (token-verifier's cacheMaxAge). */
export const DEFAULT_PUBLISH_DELAY_MS = 10 * 60_000;
/** A retiring key stays published this long after it last signed: token lifetime plus skew. */
export const DEFAULT_RETIRE_AFTER_MS = (ACCESS_TOKEN_TTL_SECONDS + VERIFIER_SKEW_SECONDS) * 1000;

export interface RotationPolicy {
  /** From publication to first signature: at least the verifiers' JWKS cache age. */
  readonly publishDelayMs: number;
  /** From last signature to leaving the JWKS: at least the token lifetime plus skew. */
  readonly retireAfterMs: number;
}

export const DEFAULT_ROTATION_POLICY: RotationPolicy = { publishDelayMs: DEFAULT_PUBLISH_DELAY_MS, retireAfterMs: DEFAULT_RETIRE_AFTER_MS };

export type RotationPlan =
  | { readonly ok: true; readonly key: Omit<KeyTimeline, 'kid'> }
  | { readonly ok: false; readonly reason: 'rotation_pending'; readonly pendingKid: string; readonly activatesAt: Date };

/** The timeline of a new key for `rotate`; one rotation at a time (a second one waits for the first to sign). */
export function planRotation(keys: readonly KeyTimeline[], now: Date, policy: RotationPolicy): RotationPlan {
  const pending = keys.find((key) => key.state === 'published');
  if (pending) return { ok: false, reason: 'rotation_pending', pendingKid: pending.kid, activatesAt: pending.activatesAt };
  return { ok: true, key: { state: 'published', createdAt: now, activatesAt: new Date(now.getTime() + policy.publishDelayMs), retiresAt: null } };
}

/** The timeline of the very first key: no token exists yet, so it signs at once. */
export function initialKey(now: Date): Omit<KeyTimeline, 'kid'> {
  return { state: 'signing', createdAt: now, activatesAt: now, retiresAt: null };
}

/**
 * The transitions due at `now`, as the changed keys (empty when nothing is due). A published key
 * whose time has come signs; the key it replaces retires `retireAfterMs` from now (now, not the
 * planned activation: the old key may have signed until this very moment); a retiring key past
 * its time leaves the JWKS.
 */
export function advance(keys: readonly KeyTimeline[], now: Date, policy: RotationPolicy): KeyTimeline[] {
  const changes = new Map<string, KeyTimeline>();
  const due = keys.filter((key) => key.state === 'published' && key.activatesAt.getTime() <= now.getTime()).sort((a, b) => a.activatesAt.getTime() - b.activatesAt.getTime());
  const next = due.at(-1);
  if (next) {
    const retiresAt = new Date(now.getTime() + policy.retireAfterMs);
    for (const key of keys) {
      if (key.kid === next.kid) changes.set(key.kid, { ...key, state: 'signing' });
      else if (key.state === 'signing' || (key.state === 'published' && due.includes(key))) changes.set(key.kid, { ...key, state: 'retiring', retiresAt });
    }
  }
  for (const key of keys) {
    const current = changes.get(key.kid) ?? key;
    if (current.state === 'retiring' && current.retiresAt && current.retiresAt.getTime() <= now.getTime()) changes.set(key.kid, { ...current, state: 'retired' });
  }
  return [...changes.values()];
}

/** Applies `advance`'s changes to a key list. */
export function applyChanges(keys: readonly KeyTimeline[], changes: readonly KeyTimeline[]): KeyTimeline[] {
  const byKid = new Map(changes.map((key) => [key.kid, key]));
  return keys.map((key) => byKid.get(key.kid) ?? key);
}

/**
 * The kids of the provider's key set in order: the signing key first (oidc-provider signs with the
 * first matching key), then keys about to sign, then keys whose tokens may still be live.
 */
export function publishedOrder(keys: readonly KeyTimeline[]): string[] {
  const rank: Record<KeyState, number> = { signing: 0, published: 1, retiring: 2, retired: 3 };
  return keys
    .filter((key) => key.state !== 'retired')
    .sort((a, b) => rank[a.state] - rank[b.state] || b.activatesAt.getTime() - a.activatesAt.getTime())
    .map((key) => key.kid);
}
