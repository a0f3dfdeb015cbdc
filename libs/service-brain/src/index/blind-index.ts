import { createHmac, createSecretKey, hkdfSync, type KeyObject } from 'node:crypto';
import { hashText } from './term-hashes';

/**
 * Where the per-tenant keys of the blind index come from. Today they are derived from one
 * configured secret; the encryption work replaces this with per-tenant data keys wrapped by a
 * key-encryption key (or a KMS) behind the same port.
 */
export interface TenantIndexKeys {
  keyFor(tenantId: string): Promise<Buffer>;
}

export const MIN_INDEX_SECRET_BYTES = 32;
const DERIVATION_SALT = Buffer.from('mission-service/brain/blind-index/v1', 'utf8');

/** HKDF-SHA256(secret, salt, info = tenant id): one independent 256-bit key per tenant. */
export class DerivedTenantIndexKeys implements TenantIndexKeys {
  private readonly keys = new Map<string, Buffer>();

  constructor(private readonly secret: Buffer) {
    if (secret.length < MIN_INDEX_SECRET_BYTES) throw new Error(`The blind-index secret must be at least ${MIN_INDEX_SECRET_BYTES} bytes`);
  }

  async keyFor(tenantId: string): Promise<Buffer> {
    let key = this.keys.get(tenantId);
    if (!key) {
      key = Buffer.from(hkdfSync('sha256', this.secret, DERIVATION_SALT, Buffer.from(tenantId, 'utf8'), 32));
      this.keys.set(tenantId, key);
    }
    return key;
  }
}

/** Where a hash's halves start looking in an open-addressing table. */
function hashSlot(high: number, low: number): number {
  return Math.imul(high ^ Math.imul(low, 0x85ebca6b), 0x9e3779b1) >>> 0;
}

/**
 * Keyed hashes of index terms: HMAC-SHA256(tenant key, term), truncated to its first 64 bits and
 * stored as a signed bigint. The database holds no plaintext term, another tenant's hashes of the
 * same word differ, and ranking is unchanged: BM25 only compares terms for equality, and two
 * distinct terms of one tenant share a hash with probability about n²/2⁶⁵ (≈ 3·10⁻⁸ for a
 * million distinct terms).
 */
export class TermHasher {
  /** Recent hashes, as halves (term-hashes.ts): term frequencies are Zipfian, so most terms of a new document were hashed before. */
  private readonly cache = new Map<string, readonly [number, number]>();
  /**
   * The key as a KeyObject, made once: given raw bytes, Node.js 24's createHmac first tries them
   * as a KeyObject and as a CryptoKey, which made an HMAC five times as costly (34 µs against 7 on
   * the machine measured; a tenth of the samples of a profiled Brain load).
   */
  private readonly secretKey: KeyObject;

  constructor(
    key: Buffer,
    private readonly cacheLimit = 100_000,
  ) {
    this.secretKey = createSecretKey(key);
  }

  /** Decimal string of the signed 64-bit hash (PostgreSQL bigint). */
  hash(term: string): string {
    const [high, low] = this.halves(term);
    return hashText(high, low);
  }

  /** The hash's two halves: the high 32 bits signed, the low 32 bits as their bit pattern. */
  protected halves(term: string): readonly [number, number] {
    let halves = this.cache.get(term);
    if (halves === undefined) {
      const digest = createHmac('sha256', this.secretKey).update(term, 'utf8').digest();
      halves = [digest.readInt32BE(0), digest.readInt32BE(4)];
      if (this.cache.size >= this.cacheLimit) this.cache.clear();
      this.cache.set(term, halves);
    }
    return halves;
  }

  /** Per term number of `numberedGeneration`: its slot (numberedSlot), or -1 where not hashed yet. */
  private slots = new Int32Array(1024).fill(-1);
  /** Per slot (the number of the first term of the generation with that hash): the hash's halves. */
  private highs = new Int32Array(1024);
  private lows = new Int32Array(1024);
  /**
   * The slot of each hash met in this generation, found by its halves: an open-addressing table of
   * slots (-1 empty) whose halves are `highs`/`lows`, at most half full. Terms whose hashes collide
   * share a slot.
   */
  private bySlotHash = new Int32Array(2048).fill(-1);
  private bySlotHashUsed = 0;
  private numberedGeneration = Number.NaN;

  /**
   * The term's slot, by its number in the analyser's dictionary of `generation` (eachTermCount):
   * the number of the first term of the generation with the same hash, so that two terms whose
   * hashes collide have one slot, as they have one hash. The hash's halves are then `high(slot)`
   * and `low(slot)`: arrays read instead of a map lookup and a decimal string per term
   * (ingestion hashes every distinct term of every chunk). A new generation starts again. The
   * arrays hold as many entries as the dictionary gives numbers (at most 200,000).
   */
  numberedSlot(term: string, number: number, generation: number): number {
    if (generation !== this.numberedGeneration) {
      this.slots.fill(-1);
      this.bySlotHash.fill(-1);
      this.bySlotHashUsed = 0;
      this.numberedGeneration = generation;
    }
    if (number >= this.slots.length) this.grow(number + 1);
    let slot = this.slots[number] as number;
    if (slot === -1) {
      const [high, low] = this.halves(term);
      const table = this.bySlotHash;
      const mask = table.length - 1;
      let at = hashSlot(high, low) & mask;
      for (let held = table[at] as number; held !== -1; held = table[at] as number) {
        if (this.highs[held] === high && this.lows[held] === low) {
          slot = held;
          break;
        }
        at = (at + 1) & mask;
      }
      if (slot === -1) {
        slot = number;
        this.highs[number] = high;
        this.lows[number] = low;
        table[at] = number;
        if (2 * ++this.bySlotHashUsed > table.length) this.growTable();
      }
      this.slots[number] = slot;
    }
    return slot;
  }

  private growTable(): void {
    const old = this.bySlotHash;
    const table = new Int32Array(old.length * 2).fill(-1);
    const mask = table.length - 1;
    for (const held of old) {
      if (held === -1) continue;
      let at = hashSlot(this.highs[held] as number, this.lows[held] as number) & mask;
      while (table[at] !== -1) at = (at + 1) & mask;
      table[at] = held;
    }
    this.bySlotHash = table;
  }

  /** The high half of the hash of a slot numberedSlot gave. */
  high(slot: number): number {
    return this.highs[slot] as number;
  }

  /** The low half of the hash of a slot numberedSlot gave. */
  low(slot: number): number {
    return this.lows[slot] as number;
  }

  private grow(size: number): void {
    let length = this.slots.length;
    while (length < size) length *= 2;
    const slots = new Int32Array(length).fill(-1);
    slots.set(this.slots);
    const highs = new Int32Array(length);
    highs.set(this.highs);
    const lows = new Int32Array(length);
    lows.set(this.lows);
    [this.slots, this.highs, this.lows] = [slots, highs, lows];
  }

  /** Proves which key indexed a tenant's terms, so a changed secret is detected instead of silently finding nothing. */
  keyCheck(): string {
    return this.hash('\u0000mission-service/brain/key-check');
  }
}
