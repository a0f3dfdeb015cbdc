interface Entry<V> {
  readonly value: V;
  readonly expiresAt: number;
}

/**
 * An in-memory map whose entries expire and whose size is capped: at the cap the least recently
 * written entry goes first, so a flood of writes costs bounded memory instead of the process.
 */
export class ExpiringStore<V> {
  private readonly entries = new Map<string, Entry<V>>();

  constructor(
    private readonly maxEntries: number,
    private readonly now: () => number = Date.now,
  ) {
    if (!Number.isInteger(maxEntries) || maxEntries < 1) throw new Error('maxEntries must be a positive integer');
  }

  set(key: string, value: V, ttlSeconds?: number): void {
    this.entries.delete(key);
    const expiresAt = ttlSeconds === undefined ? Infinity : this.now() + ttlSeconds * 1000;
    this.entries.set(key, { value, expiresAt });
    while (this.entries.size > this.maxEntries) {
      const oldest = this.entries.keys().next().value;
      if (oldest === undefined) break;
      this.entries.delete(oldest);
    }
  }

  get(key: string): V | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    if (entry.expiresAt <= this.now()) {
      this.entries.delete(key);
      return undefined;
    }
    return entry.value;
  }

  delete(key: string): void {
    this.entries.delete(key);
  }

  /** Live entries whose key starts with `prefix`. */
  *entriesWithPrefix(prefix: string): Generator<[string, V]> {
    const now = this.now();
    for (const [key, entry] of [...this.entries]) {
      if (entry.expiresAt <= now) this.entries.delete(key);
      else if (key.startsWith(prefix)) yield [key, entry.value];
    }
  }

  get size(): number {
    return this.entries.size;
  }
}
