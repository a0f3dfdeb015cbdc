import { createHmac, createSecretKey, hkdfSync, type KeyObject } from 'node:crypto';

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

/**
 * Keyed hashes of index terms: HMAC-SHA256(tenant key, term), truncated to its first 64 bits and
 * stored as a signed bigint. The database holds no plaintext term, another tenant's hashes of the
 * same word differ, and ranking is unchanged: BM25 only compares terms for equality, and two
 * distinct terms of one tenant share a hash with probability about n²/2⁶⁵ (≈ 3·10⁻⁸ for a
 * million distinct terms).
 */
export class TermHasher {
  /** Recent hashes: term frequencies are Zipfian, so most terms of a new document were hashed before. */
  private readonly cache = new Map<string, string>();
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
    let hash = this.cache.get(term);
    if (hash === undefined) {
      hash = createHmac('sha256', this.secretKey).update(term, 'utf8').digest().readBigInt64BE(0).toString();
      if (this.cache.size >= this.cacheLimit) this.cache.clear();
      this.cache.set(term, hash);
    }
    return hash;
  }

  /** Hashes by term number (analyzer's eachTermCount) for `numberedGeneration`; undefined where not hashed yet. */
  private numbered: Array<string | undefined> = [];
  private numberedGeneration = Number.NaN;

  /**
   * hash(term), kept by the term's number in the analyser's dictionary of `generation`: an array
   * read instead of a map lookup per term (ingestion hashes every distinct term of every chunk).
   * A new generation starts the array again. It holds at most as many entries as the
   * dictionary gives numbers (200,000).
   */
  hashNumbered(term: string, number: number, generation: number): string {
    if (generation !== this.numberedGeneration) {
      this.numbered = [];
      this.numberedGeneration = generation;
    }
    let hash = this.numbered[number];
    if (hash === undefined) {
      hash = this.hash(term);
      // Filled in order, never with holes: the array stays a plain one however the numbers come.
      while (this.numbered.length < number) this.numbered.push(undefined);
      this.numbered[number] = hash;
    }
    return hash;
  }

  /** Proves which key indexed a tenant's terms, so a changed secret is detected instead of silently finding nothing. */
  keyCheck(): string {
    return this.hash('\u0000mission-service/brain/key-check');
  }
}
