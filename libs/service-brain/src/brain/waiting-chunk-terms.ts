import type { ChunkTerms } from '../ranking/postings';

/** What a merge needs of the chunks this process stored, kept at most (about 13,000 chunks of 1.2 KB). */
export const WAITING_TERMS_MAX_BYTES = 32 * 1024 * 1024;

/** Bytes counted per chunk kept beyond its two arrays' text: the entry, the map's slot, the strings' headers. */
const ENTRY_OVERHEAD_BYTES = 160;

/** Where a merge takes a chunk's terms from without reading them back (BrainRepository.mergeUnmerged). */
export interface MergeInputs {
  /** The chunk `seq` of `tenantId` as it was stored, handed over once (the next call gives nothing), or undefined. */
  take(tenantId: string, seq: number): ChunkTerms | undefined;
}

interface Entry {
  readonly tenantId: string;
  readonly chunk: ChunkTerms;
  readonly bytes: number;
}

/**
 * The terms of the chunks this process stored and no merge has taken yet, as they were written
 * (the same array texts): a merge of this process takes them from here instead of reading every
 * chunk's two arrays back from PostgreSQL, about a third of the database's work per chunk under a
 * bulk load. Only what committed is kept (the service adds a document's chunks after its
 * transaction); a merge that reads a chunk not kept here (stored by another process or before a
 * restart, or let go) reads it from the database as before, so this is only ever a shortcut. A
 * merge takes a chunk when it begins: should its transaction then fail, the next merge reads that
 * chunk back.
 * Bounded: past `maxBytes` the oldest go first. A chunk merged by another process or deleted stays
 * until it is pushed out, never used (its seq is never handed to a merge again).
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

  /** Keeps the committed chunks of one of `tenantId`'s documents, letting the oldest go past the bound. */
  add(tenantId: string, chunks: readonly ChunkTerms[]): void {
    for (const chunk of chunks) {
      const bytes = chunk.terms.length + chunk.frequencies.length + ENTRY_OVERHEAD_BYTES;
      if (bytes > this.maxBytes) continue;
      this.remove(chunk.seq);
      this.entries.set(chunk.seq, { tenantId, chunk, bytes });
      this.heldBytes += bytes;
    }
    for (const [seq] of this.entries) {
      if (this.heldBytes <= this.maxBytes) break;
      this.remove(seq);
    }
  }

  take(tenantId: string, seq: number): ChunkTerms | undefined {
    const entry = this.entries.get(seq);
    // A seq belongs to one tenant only; the check keeps a mistake from ever crossing tenants.
    if (!entry || entry.tenantId !== tenantId) return undefined;
    this.remove(seq);
    return entry.chunk;
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
