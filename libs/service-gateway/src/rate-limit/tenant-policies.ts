import { DomainError, ErrorCode, type StorageQuota, TenantView } from '@mission/contracts';
import type { RateLimitPolicy } from '@mission/rate-limit';

export interface TenantPoliciesOptions {
  /** From this age an entry is refreshed in the background while it keeps serving. */
  readonly refreshAfterMs?: number;
  /** From this age an entry no longer serves by itself: the request waits for a fresh one. */
  readonly maxAgeMs?: number;
  /** While the identity provider cannot answer, entries up to this age still serve. */
  readonly staleIfErrorMs?: number;
  /** After a failed lookup, requests are served from the stale entry for this long without asking again. */
  readonly retryAfterFailureMs?: number;
  /** Milliseconds on a monotonic clock (tests move it). */
  readonly now?: () => number;
}

export interface PolicyLookupWarning {
  readonly tenantId: string;
  readonly error: unknown;
  readonly ageMs: number;
}

interface Entry {
  /** null: the identity provider does not know the tenant. */
  readonly policy: RateLimitPolicy | null;
  /** What the tenant may store in the Brain (null with the policy). */
  readonly storage: StorageQuota | null;
  readonly fetchedAt: number;
  readonly failedAt?: number;
}

/**
 * Each tenant's rate-limit policy (tier and requests per minute) and storage quota, as the
 * identity provider has them, cached so that a change applies within `maxAgeMs` (5 s) without new tokens, yet requests
 * do not wait on the bus: entries are refreshed in the background from `refreshAfterMs` on, and
 * concurrent lookups of one tenant share one bus request. Only a tenant's first request, or the
 * first after a pause longer than `maxAgeMs`, waits.
 */
export class TenantPolicies {
  private readonly entries = new Map<string, Entry>();
  private readonly lookups = new Map<string, Promise<Entry>>();
  private readonly refreshAfterMs: number;
  private readonly maxAgeMs: number;
  private readonly staleIfErrorMs: number;
  private readonly retryAfterFailureMs: number;
  private readonly now: () => number;
  private readonly sweeper: NodeJS.Timeout;

  constructor(
    private readonly lookup: (tenantId: string) => Promise<TenantView>,
    private readonly onStale: (warning: PolicyLookupWarning) => void,
    options: TenantPoliciesOptions = {},
  ) {
    this.refreshAfterMs = options.refreshAfterMs ?? 2_000;
    this.maxAgeMs = options.maxAgeMs ?? 5_000;
    this.staleIfErrorMs = options.staleIfErrorMs ?? 60_000;
    this.retryAfterFailureMs = options.retryAfterFailureMs ?? 1_000;
    this.now = options.now ?? (() => performance.now());
    this.sweeper = setInterval(() => this.sweep(), this.staleIfErrorMs).unref();
  }

  /** The tenant's policy; null when the identity provider does not know the tenant. */
  async policyOf(tenantId: string): Promise<RateLimitPolicy | null> {
    return (await this.entryOf(tenantId)).policy;
  }

  /** The tenant's storage quota, as fresh as its policy; null when the identity provider does not know the tenant. */
  async storageOf(tenantId: string): Promise<StorageQuota | null> {
    return (await this.entryOf(tenantId)).storage;
  }

  private async entryOf(tenantId: string): Promise<Entry> {
    const entry = this.entries.get(tenantId);
    const now = this.now();
    if (entry) {
      const age = now - entry.fetchedAt;
      if (age < this.maxAgeMs) {
        if (age >= this.refreshAfterMs) this.refreshInBackground(tenantId);
        return entry;
      }
      if (entry.failedAt !== undefined && now - entry.failedAt < this.retryAfterFailureMs && age < this.staleIfErrorMs) return entry;
    }
    try {
      return await this.fetch(tenantId);
    } catch (error) {
      if (!entry || now - entry.fetchedAt >= this.staleIfErrorMs) throw error;
      if (this.entries.get(tenantId) === entry) this.entries.set(tenantId, { ...entry, failedAt: this.now() });
      this.onStale({ tenantId, error, ageMs: now - entry.fetchedAt });
      return entry;
    }
  }

  close(): void {
    clearInterval(this.sweeper);
    this.entries.clear();
  }

  private refreshInBackground(tenantId: string): void {
    this.fetch(tenantId).catch(() => {
      // The entry keeps serving until maxAgeMs; a request after that asks again and reports it.
    });
  }

  private fetch(tenantId: string): Promise<Entry> {
    const pending = this.lookups.get(tenantId);
    if (pending) return pending;
    const lookup = this.lookup(tenantId)
      .then(
        (tenant): Entry => ({ policy: { name: tenant.tier, limit: tenant.rpm }, storage: tenant.storage, fetchedAt: this.now() }),
        (error: unknown): Entry => {
          if (error instanceof DomainError && error.code === ErrorCode.NotFound) return { policy: null, storage: null, fetchedAt: this.now() };
          throw error;
        },
      )
      .then((entry) => {
        this.entries.set(tenantId, entry);
        return entry;
      })
      .finally(() => this.lookups.delete(tenantId));
    this.lookups.set(tenantId, lookup);
    return lookup;
  }

  private sweep(): void {
    const now = this.now();
    for (const [tenantId, entry] of this.entries) if (now - entry.fetchedAt >= this.staleIfErrorMs) this.entries.delete(tenantId);
  }
}
