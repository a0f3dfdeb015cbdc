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
 * of its document's (as the analysis threads hand them over): what is counted is the memory held,
 * each array buffer once, from the first chunk kept that uses it until the last one is taken or let
 * go (a document's chunks cut by a merge's batch, or by the bound, keep the whole document's).
 */
export class WaitingChunkTerms implements MergeInputs {
  private readonly entries = new Map<number, Entry>();
  /** The array buffers the kept chunks use, each with how many of those arrays use it. */
  private readonly buffers = new Map<ArrayBufferLike, number>();
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
      this.remove(chunk.seq);
      if (this.heldBytes + this.costOf(chunk) > this.maxBytes) this.letStaleGo(now, this.heldBytes + this.costOf(chunk) - this.maxBytes);
      // Counted again: letting go may have given back a buffer this chunk shares.
      const bytes = this.costOf(chunk);
      if (this.heldBytes + bytes > this.maxBytes) continue;
      this.entries.set(chunk.seq, { tenantId, chunk, at: now });
      this.heldBytes += bytes;
      for (const array of [chunk.hashes, chunk.frequencies]) this.buffers.set(array.buffer, (this.buffers.get(array.buffer) ?? 0) + 1);
    }
  }

  take(tenantId: string, seq: number, id: string): ChunkTerms | undefined {
    const entry = this.entries.get(seq);
    if (!entry) return undefined;
    this.remove(seq);
    // A seq belongs to one tenant and one chunk only; the checks keep a seq given again from ever crossing chunks or tenants.
    return entry.tenantId === tenantId && entry.chunk.id === id ? entry.chunk : undefined;
  }

  /** Lets go of everything (the service stopping). */
  clear(): void {
    this.entries.clear();
    this.buffers.clear();
    this.heldBytes = 0;
  }

  /** What keeping `chunk` would add: its entry, and each buffer of its arrays not held yet. */
  private costOf(chunk: StoredChunkTerms): number {
    let bytes = ENTRY_OVERHEAD_BYTES;
    const { hashes, frequencies } = chunk;
    if (!this.buffers.has(hashes.buffer)) bytes += hashes.buffer.byteLength;
    if (frequencies.buffer !== hashes.buffer && !this.buffers.has(frequencies.buffer)) bytes += frequencies.buffer.byteLength;
    return bytes;
  }

  /** Lets entries older than WAITING_TERMS_STALE_MS go, oldest first, until `bytes` are free or none is left that old. */
  private letStaleGo(now: number, bytes: number): void {
    const before = this.heldBytes;
    for (const [seq, entry] of this.entries) {
      if (before - this.heldBytes >= bytes || now - entry.at < WAITING_TERMS_STALE_MS) break;
      this.remove(seq);
    }
  }

  private remove(seq: number): void {
    const entry = this.entries.get(seq);
    if (!entry) return;
    this.entries.delete(seq);
    this.heldBytes -= ENTRY_OVERHEAD_BYTES;
    for (const array of [entry.chunk.hashes, entry.chunk.frequencies]) {
      const users = (this.buffers.get(array.buffer) ?? 1) - 1;
      if (users > 0) this.buffers.set(array.buffer, users);
      else if (this.buffers.delete(array.buffer)) this.heldBytes -= array.buffer.byteLength;
    }
  }
}
