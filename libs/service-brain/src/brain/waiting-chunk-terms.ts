import type { ChunkTerms } from '../ranking/postings';

/** What a merge needs of the chunks this process stored, kept at most (about 20,000 chunks of 1.2 KB of text: 12 bytes a distinct term). */
export const WAITING_TERMS_MAX_BYTES = 32 * 1024 * 1024;

/** Bytes counted per chunk kept beyond its two arrays' contents: the entry, the map's slot, the arrays' objects. */
const ENTRY_OVERHEAD_BYTES = 400;

/** An entry older than this may be let go to make room for a new one (it was likely merged by another replica). */
export const WAITING_TERMS_STALE_MS = 60_000;

/** A stored chunk as a merge needs it, with the id it was stored under. */
export type StoredChunkTerms = ChunkTerms & { readonly id: string };

/** Where a merge takes a chunk's terms from without reading them back (BrainRepository.mergeUnmerged). */
export interface MergeInputs {
  /**
   * The chunk `seq` of `tenantId` as it was stored, if it was stored under `id` (a seq the
   * database gives again, after a restore or a failover, is another chunk), handed over once
   * (the next call gives nothing); otherwise undefined.
   */
  take(tenantId: string, seq: number, id: string): ChunkTerms | undefined;
}

interface Entry {
  readonly tenantId: string;
  readonly chunk: StoredChunkTerms;
  readonly bytes: number;
  readonly at: number;
}

/**
 * The terms of the chunks this process stored and no merge has taken yet, as they were written
 * (the same arrays of hashes and frequencies): a merge of this process takes them from here instead of reading every
 * chunk's two arrays back from PostgreSQL, about a third of the database's work per chunk under a
 * bulk load. Only what committed is kept (the service adds a document's chunks after its
 * transaction); a merge that reads a chunk not kept here (stored by another process or before a
 * restart, or let go) reads it from the database as before, so this is only ever a shortcut. A
 * merge takes a chunk when it begins: should its transaction then fail, the next merge reads that
 * chunk back.
 * Bounded by `maxBytes`: merges take the oldest chunks first, so when full this keeps what it
 * holds and lets new chunks go (their merge reads them back), except that entries older than
 * WAITING_TERMS_STALE_MS make room (a chunk merged by another replica, or deleted, is never taken
 * here). An entry is used only for the chunk id it was stored under. A chunk's arrays may be views
 * of its document's (as the analysis threads hand them over): counted by their own bytes, they
 * keep the document's arrays until its last chunk is taken or let go; merges and letting go both
 * take the oldest first, so a document's chunks leave together, but for the one a merge's batch
 * ends in (held until the next merge).
 */
export class WaitingChunkTerms implements MergeInputs {
  private readonly entries = new Map<number, Entry>();
  private heldBytes = 0;

  constructor(private readonly maxBytes = WAITING_TERMS_MAX_BYTES) {
    if (!Number.isSafeInteger(maxBytes) || maxBytes < 0) throw new RangeError('maxBytes must be a whole number of bytes');
  }

  /** Chunks kept, and the bytes they are counted for. */
  get size(): number {
    return this.entries.size;
  }

  get bytes(): number {
    return this.heldBytes;
  }

  /** Keeps the committed chunks of one of `tenantId`'s documents, as far as the bound allows (see the class). */
  add(tenantId: string, chunks: readonly StoredChunkTerms[], now = Date.now()): void {
    for (const chunk of chunks) {
      const bytes = chunk.hashes.byteLength + chunk.frequencies.byteLength + ENTRY_OVERHEAD_BYTES;
      this.remove(chunk.seq);
      if (this.heldBytes + bytes > this.maxBytes) this.letStaleGo(now, this.heldBytes + bytes - this.maxBytes);
      if (this.heldBytes + bytes > this.maxBytes) continue;
      this.entries.set(chunk.seq, { tenantId, chunk, bytes, at: now });
      this.heldBytes += bytes;
    }
  }

  take(tenantId: string, seq: number, id: string): ChunkTerms | undefined {
    const entry = this.entries.get(seq);
    if (!entry) return undefined;
    this.remove(seq);
    // A seq belongs to one tenant and one chunk only; the checks keep a seq given again from ever crossing chunks or tenants.
    return entry.tenantId === tenantId && entry.chunk.id === id ? entry.chunk : undefined;
  }

  /** Lets entries older than WAITING_TERMS_STALE_MS go, oldest first, until `bytes` are free or none is left that old. */
  private letStaleGo(now: number, bytes: number): void {
    let freed = 0;
    for (const [seq, entry] of this.entries) {
      if (freed >= bytes || now - entry.at < WAITING_TERMS_STALE_MS) break;
      freed += entry.bytes;
      this.remove(seq);
    }
  }

  /** Lets go of everything (the service stopping). */
  clear(): void {
    this.entries.clear();
    this.heldBytes = 0;
  }

  private remove(seq: number): void {
    const entry = this.entries.get(seq);
    if (!entry) return;
    this.entries.delete(seq);
    this.heldBytes -= entry.bytes;
  }
}
