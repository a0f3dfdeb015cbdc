import { type ChunkTerms, groupByTerm, maxSegmentBytes, writeSegment } from '../ranking/postings';

/**
 * What a merge writes into posting blocks, computed from its batch of chunks: one segment per
 * term (postings.ts), with where its chunks begin and end. Pure computation over typed arrays, so
 * a large batch's (a bulk load's merge of 16,384 chunks: some 1.6 million postings, 150–250 ms)
 * runs on an analysis thread (document-analyser.ts) instead of holding the service's thread, and
 * with it every request in flight; the batch and the segments cross between the threads packed in
 * a few arrays each.
 */

/** One term's segment of a merge batch. */
export interface MergeSegment {
  /** The term hash's halves. */
  readonly high: number;
  readonly low: number;
  /** The first and last chunk of the segment (sequence numbers). */
  readonly first: number;
  readonly last: number;
  /** Postings in the segment. */
  readonly size: number;
  readonly bytes: Buffer;
}

/** A merge batch's chunks in a few arrays (of buffers of their own when packed here: movable to a thread). */
export interface PackedChunkTerms<B extends ArrayBufferLike = ArrayBufferLike> {
  readonly seqs: Float64Array<B>;
  readonly lengths: Int32Array<B>;
  /** Distinct terms per chunk. */
  readonly counts: Int32Array<B>;
  /** Every chunk's hashes (pairs of halves), one after the other. */
  readonly hashes: Int32Array<B>;
  /** Every chunk's frequencies, one after the other. */
  readonly frequencies: Int32Array<B>;
}

/** A merge batch's segments in a few arrays: segment `i`'s bytes are `bytes` from `ends[i - 1]` (0 for the first) to `ends[i]`. */
export interface PackedSegments {
  readonly highs: Int32Array;
  readonly lows: Int32Array;
  readonly firsts: Float64Array;
  readonly lasts: Float64Array;
  readonly sizes: Int32Array;
  readonly ends: Int32Array;
  readonly bytes: Uint8Array;
}

export function packChunkTerms(batch: readonly ChunkTerms[]): PackedChunkTerms<ArrayBuffer> {
  let terms = 0;
  for (const chunk of batch) terms += chunk.frequencies.length;
  const packed = {
    seqs: Float64Array.from(batch, (chunk) => chunk.seq),
    lengths: Int32Array.from(batch, (chunk) => chunk.length),
    counts: Int32Array.from(batch, (chunk) => chunk.frequencies.length),
    hashes: new Int32Array(2 * terms),
    frequencies: new Int32Array(terms),
  };
  let at = 0;
  for (const chunk of batch) {
    if (chunk.hashes.length !== 2 * chunk.frequencies.length)
      throw new RangeError(`Chunk ${chunk.seq} has ${chunk.hashes.length / 2} terms and ${chunk.frequencies.length} frequencies`);
    packed.hashes.set(chunk.hashes, 2 * at);
    packed.frequencies.set(chunk.frequencies, at);
    at += chunk.frequencies.length;
  }
  return packed;
}

/** The chunks of a packed batch, as views of its arrays; refuses one whose arrays do not add up. */
export function unpackChunkTerms(packed: PackedChunkTerms): ChunkTerms[] {
  const { seqs, lengths, counts, hashes, frequencies } = packed;
  if (lengths.length !== seqs.length || counts.length !== seqs.length)
    throw new RangeError(`A packed batch of ${seqs.length} chunks has ${lengths.length} lengths and ${counts.length} counts`);
  let terms = 0;
  for (const count of counts) {
    if (count < 0) throw new RangeError('A packed batch has a chunk of fewer than no terms');
    terms += count;
  }
  if (frequencies.length !== terms || hashes.length !== 2 * terms)
    throw new RangeError(`A packed batch counts ${terms} terms, and holds ${frequencies.length} frequencies and ${hashes.length} halves`);
  const chunks: ChunkTerms[] = [];
  let at = 0;
  for (let index = 0; index < seqs.length; index++) {
    const count = counts[index] as number;
    chunks.push({
      seq: seqs[index] as number,
      length: lengths[index] as number,
      hashes: hashes.subarray(2 * at, 2 * (at + count)),
      frequencies: frequencies.subarray(at, at + count),
    });
    at += count;
  }
  return chunks;
}

/** The batch's segments (chunks in ascending `seq`), packed: groupByTerm, each term's postings written as a segment one after the other. */
export function packedSegmentsOf(batch: readonly ChunkTerms[]): PackedSegments {
  const grouped = groupByTerm(batch);
  const terms = grouped.length;
  const packed = {
    highs: new Int32Array(terms),
    lows: new Int32Array(terms),
    firsts: new Float64Array(terms),
    lasts: new Float64Array(terms),
    sizes: new Int32Array(terms),
    ends: new Int32Array(terms),
  };
  let postings = 0;
  for (const list of grouped) postings += list.seqs.length;
  // About 3.5 bytes a posting (postings.ts); grown when a segment might not fit.
  let bytes = new Uint8Array(Math.max(64, 4 * postings));
  let at = 0;
  for (const [index, list] of grouped.entries()) {
    const size = list.seqs.length;
    const room = maxSegmentBytes(size);
    if (at + room > bytes.length) {
      const larger = new Uint8Array(Math.max(2 * bytes.length, at + room));
      larger.set(bytes.subarray(0, at));
      bytes = larger;
    }
    at = writeSegment(bytes, at, list.seqs, list.frequencies, list.lengths);
    packed.highs[index] = list.high;
    packed.lows[index] = list.low;
    packed.firsts[index] = list.seqs[0] as number;
    packed.lasts[index] = list.seqs[size - 1] as number;
    packed.sizes[index] = size;
    packed.ends[index] = at;
  }
  return { ...packed, bytes: bytes.subarray(0, at) };
}

/** The segments of a packed result, their bytes as views of its `bytes`; refuses one whose arrays do not add up. */
export function unpackSegments(packed: PackedSegments): MergeSegment[] {
  const { highs, lows, firsts, lasts, sizes, ends, bytes } = packed;
  const terms = highs.length;
  if ([lows, firsts, lasts, sizes, ends].some((array) => array.length !== terms)) throw new RangeError(`A packed merge of ${terms} segments has arrays of other lengths`);
  const all = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const segments: MergeSegment[] = new Array<MergeSegment>(terms);
  let start = 0;
  for (let index = 0; index < terms; index++) {
    const end = ends[index] as number;
    if (end <= start || end > all.length) throw new RangeError(`A packed merge's segment ${index} ends at ${end}, after ${start} and within ${all.length}`);
    segments[index] = {
      high: highs[index] as number,
      low: lows[index] as number,
      first: firsts[index] as number,
      last: lasts[index] as number,
      size: sizes[index] as number,
      bytes: all.subarray(start, end),
    };
    start = end;
  }
  if (start !== all.length) throw new RangeError(`A packed merge's segments end at ${start}, before its ${all.length} bytes`);
  return segments;
}

/** The batch's segments on the calling thread. */
export function mergeSegments(batch: readonly ChunkTerms[]): MergeSegment[] {
  return unpackSegments(packedSegmentsOf(batch));
}
