import { LRUCache } from 'lru-cache';
import { FINAL_MISSION_STATUSES, type MissionView } from '@mission/contracts';
import { immutable } from '@mission/messaging';

/** What the cache may hold by default: 48 MiB (about 16 MiB of missions as JSON, each with the JSON kept beside it), at most 10,000 missions. */
export const FINAL_MISSION_CACHE_DEFAULTS = { maxBytes: 48 * 1024 * 1024, maxEntries: 10_000 } as const;

export interface FinalMissionCacheOptions {
  /**
   * Upper bound of what the cached missions take, each counted three times its JSON's length
   * (UTF-16 code units, about bytes; an estimate, V8's objects are not their JSON): the view, the
   * reply encoded from it once and kept with it (`immutable` in @mission/messaging), and on the
   * all-in-one process the view's own JSON, kept by the gateway that answers with it. 0 turns the
   * cache off.
   */
  readonly maxBytes?: number;
  readonly maxEntries?: number;
}

/**
 * Missions in a final status, kept in memory for the reads that poll them (a final mission never
 * changes again: no transition leaves a final status, and nothing rewrites its content). Keyed by
 * tenant and id, and an entry answers only the tenant it was read for, so one tenant never sees
 * another's mission. Bounded by entries and by size, least recently read evicted first. Each
 * replica keeps its own; they cannot disagree, since what they hold cannot change.
 */
export class FinalMissionCache {
  private readonly cache?: LRUCache<string, { readonly tenantId: string; readonly view: MissionView }>;

  constructor(options: FinalMissionCacheOptions = {}) {
    const maxBytes = options.maxBytes ?? FINAL_MISSION_CACHE_DEFAULTS.maxBytes;
    if (!Number.isSafeInteger(maxBytes) || maxBytes < 0) throw new RangeError(`The final-mission cache size must be a whole number of bytes, not ${maxBytes}`);
    if (maxBytes === 0) return;
    this.cache = new LRUCache({
      max: options.maxEntries ?? FINAL_MISSION_CACHE_DEFAULTS.maxEntries,
      maxSize: maxBytes,
      // A mission larger than the whole budget is simply not kept.
      maxEntrySize: maxBytes,
      sizeCalculation: (entry) => Math.max(1, 3 * JSON.stringify(entry.view).length),
    });
  }

  get(tenantId: string, id: string): MissionView | undefined {
    const entry = this.cache?.get(key(tenantId, id));
    return entry && entry.tenantId === tenantId ? entry.view : undefined;
  }

  /** Keeps the mission if it is final; any other status is never cached. */
  offer(tenantId: string, view: MissionView): void {
    if (!this.cache || !FINAL_MISSION_STATUSES.includes(view.status)) return;
    this.cache.set(key(tenantId, view.id), { tenantId, view: immutable(view) });
  }

  get size(): number {
    return this.cache?.size ?? 0;
  }
}

// Ids are UUIDs and tenant ids never contain a NUL: the pair cannot collide with another.
const key = (tenantId: string, id: string): string => `${tenantId}\u0000${id}`;
