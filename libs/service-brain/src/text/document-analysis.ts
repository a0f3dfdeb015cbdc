import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import type { TermHasher } from '../index/blind-index';
import { chunkTerms } from '../index/chunk-terms';
import { chunkText, type ChunkingOptions } from './chunker';

/** A passage of a document with its index terms (chunk-terms.ts): what ingestion stores of it. */
export interface AnalysedChunk {
  readonly text: string;
  readonly length: number;
  readonly hashes: Int32Array;
  readonly frequencies: Int32Array;
}

/** Chunks analysed between two yields to the event loop while a large document is analysed on the service's thread. */
const CHUNKS_PER_SLICE = 64;

/**
 * A document's passages (chunkText) with their index terms under the tenant's hasher. The title
 * is indexed with every chunk, so a passage is found by its document's title too. With `yielding`,
 * returns to the event loop every CHUNKS_PER_SLICE chunks (on a thread that serves other requests).
 */
export async function analyseDocument(hasher: TermHasher, content: string, title: string, chunking: ChunkingOptions, yielding = true): Promise<AnalysedChunk[]> {
  const texts = chunkText(content, chunking);
  const chunks: AnalysedChunk[] = [];
  for (const [ordinal, text] of texts.entries()) {
    const { hashes, frequencies, length } = chunkTerms(hasher, [text, title]);
    chunks.push({ text, length, hashes, frequencies });
    if (yielding && ordinal % CHUNKS_PER_SLICE === CHUNKS_PER_SLICE - 1) await yieldToEventLoop();
  }
  return chunks;
}

/** A document's analysis in a few arrays, so that it crosses between threads in a few transfers instead of one per chunk. */
export interface PackedAnalysis {
  readonly texts: string[];
  readonly lengths: Int32Array;
  /** Distinct terms per chunk. */
  readonly counts: Int32Array;
  /** Every chunk's hashes (pairs of halves), one after the other. */
  readonly hashes: Int32Array;
  /** Every chunk's frequencies, one after the other. */
  readonly frequencies: Int32Array;
}

export function packAnalysis(chunks: readonly AnalysedChunk[]): PackedAnalysis {
  let terms = 0;
  for (const chunk of chunks) terms += chunk.frequencies.length;
  const packed = {
    texts: chunks.map((chunk) => chunk.text),
    lengths: Int32Array.from(chunks, (chunk) => chunk.length),
    counts: Int32Array.from(chunks, (chunk) => chunk.frequencies.length),
    hashes: new Int32Array(2 * terms),
    frequencies: new Int32Array(terms),
  };
  let at = 0;
  for (const chunk of chunks) {
    packed.hashes.set(chunk.hashes, 2 * at);
    packed.frequencies.set(chunk.frequencies, at);
    at += chunk.frequencies.length;
  }
  return packed;
}

/**
 * The chunks of a packed analysis, their arrays views of the packed ones (copying each chunk's
 * two arrays out cost the service's thread about half a millisecond a document); refuses one whose
 * arrays do not add up.
 */
export function unpackAnalysis(packed: PackedAnalysis): AnalysedChunk[] {
  const { texts, lengths, counts, hashes, frequencies } = packed;
  if (lengths.length !== texts.length || counts.length !== texts.length)
    throw new RangeError(`A packed analysis of ${texts.length} chunks has ${lengths.length} lengths and ${counts.length} counts`);
  let terms = 0;
  for (const count of counts) {
    if (count < 0) throw new RangeError('A packed analysis has a chunk of fewer than no terms');
    terms += count;
  }
  if (frequencies.length !== terms || hashes.length !== 2 * terms)
    throw new RangeError(`A packed analysis counts ${terms} terms, and holds ${frequencies.length} frequencies and ${hashes.length} halves`);
  const chunks: AnalysedChunk[] = [];
  let at = 0;
  for (const [index, text] of texts.entries()) {
    const count = counts[index] as number;
    chunks.push({ text, length: lengths[index] as number, hashes: hashes.subarray(2 * at, 2 * (at + count)), frequencies: frequencies.subarray(at, at + count) });
    at += count;
  }
  return chunks;
}
