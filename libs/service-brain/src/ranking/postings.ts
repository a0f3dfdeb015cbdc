/**
 * A term's postings as `brain.posting_blocks.postings` holds them, and the per-chunk sums that
 * ranking builds from them.
 *
 * A block is one or more segments, one per merge that wrote into it (a later merge appends its
 * segment: plain concatenation). A segment is its posting count followed by its postings in
 * ascending chunk order, each as three unsigned LEB128 varints: the chunk's sequence number minus
 * the previous posting's (the first: the number itself), the term's frequency in the chunk, and
 * the chunk's length in terms. A common word's posting takes 3 to 4 bytes, against 16 as three
 * arrays; PostgreSQL hands a block over without looking inside, and ranking reads a hundred
 * thousand postings in a few milliseconds here instead of aggregating them in SQL (about a
 * microsecond each).
 */

/** The postings of one block (or of several), in the order stored. */
export interface DecodedPostings {
  readonly seqs: number[];
  readonly frequencies: number[];
  readonly lengths: number[];
}

/** Most bytes a varint of a safe integer takes (53 bits, 7 per byte). */
const MAX_VARINT_BYTES = 8;

function assertWhole(value: number, what: string, minimum: number): void {
  if (!Number.isSafeInteger(value) || value < minimum) throw new RangeError(`A posting's ${what} must be a whole number ≥ ${minimum}, not ${value}`);
}

/**
 * One segment: postings given in ascending chunk order (`seqs` strictly increasing), each chunk's
 * sequence number, term frequency (≥ 1) and length (≥ 0).
 */
export function encodeSegment(seqs: ArrayLike<number>, frequencies: ArrayLike<number>, lengths: ArrayLike<number>): Buffer {
  const count = seqs.length;
  if (frequencies.length !== count || lengths.length !== count) throw new RangeError(`A segment needs as many frequencies and lengths as chunks (${count})`);
  if (count === 0) throw new RangeError('A segment holds at least one posting');
  const out = Buffer.allocUnsafe(MAX_VARINT_BYTES * (1 + 3 * count));
  let at = writeVarint(out, 0, count);
  let previous = 0;
  for (let index = 0; index < count; index++) {
    const seq = seqs[index] as number;
    const tf = frequencies[index] as number;
    const length = lengths[index] as number;
    assertWhole(seq, 'chunk', previous + 1);
    assertWhole(tf, 'frequency', 1);
    assertWhole(length, 'length', 0);
    at = writeVarint(out, at, seq - previous);
    at = writeVarint(out, at, tf);
    at = writeVarint(out, at, length);
    previous = seq;
  }
  return Buffer.from(out.subarray(0, at));
}

function writeVarint(out: Buffer, at: number, value: number): number {
  let rest = value;
  while (rest >= 0x80) {
    out[at++] = (rest % 0x80) | 0x80;
    rest = Math.floor(rest / 0x80);
  }
  out[at++] = rest;
  return at;
}

/** Reads the varint at `state.at`, moving it past. Refuses a truncated or oversized one. */
function readVarint(bytes: Uint8Array, state: { at: number }): number {
  let value = 0;
  let scale = 1;
  for (let read = 0; read < MAX_VARINT_BYTES; read++) {
    if (state.at >= bytes.length) throw new RangeError('Posting block ends inside a number');
    const byte = bytes[state.at++] as number;
    value += (byte & 0x7f) * scale;
    if (byte < 0x80) {
      if (!Number.isSafeInteger(value)) break;
      return value;
    }
    scale *= 0x80;
  }
  throw new RangeError('Posting block holds a number too large');
}

/** Calls `visit` for every posting of a block, segment by segment. */
export function forEachPosting(bytes: Uint8Array, visit: (seq: number, tf: number, length: number) => void): void {
  const state = { at: 0 };
  while (state.at < bytes.length) {
    const count = readVarint(bytes, state);
    if (count === 0) throw new RangeError('Posting block holds an empty segment');
    let seq = 0;
    for (let index = 0; index < count; index++) {
      seq += readVarint(bytes, state);
      visit(seq, readVarint(bytes, state), readVarint(bytes, state));
    }
  }
}

export function decodePostings(bytes: Uint8Array): DecodedPostings {
  const decoded: DecodedPostings = { seqs: [], frequencies: [], lengths: [] };
  forEachPosting(bytes, (seq, tf, length) => {
    decoded.seqs.push(seq);
    decoded.frequencies.push(tf);
    decoded.lengths.push(length);
  });
  return decoded;
}

/** The postings in one segment: sorted by chunk (a block appended to out of order holds them unsorted). */
export function encodePostings(postings: DecodedPostings): Buffer {
  const order = postings.seqs.map((_, index) => index).sort((a, b) => (postings.seqs[a] as number) - (postings.seqs[b] as number));
  return encodeSegment(
    order.map((index) => postings.seqs[index] as number),
    order.map((index) => postings.frequencies[index] as number),
    order.map((index) => postings.lengths[index] as number),
  );
}

/** BM25's length normalisation as an affine function of the chunk length (see lengthNormalisation). */
export interface Normalisation {
  readonly constant: number;
  readonly perTerm: number;
}

/**
 * One term's contribution to a chunk's score, in units of 1e-9, rounded half to even as
 * PostgreSQL rounds a float8: sums of such integers are exact in any order, so a score does not
 * depend on the order postings arrive in, and equals what SQL computes for the same posting.
 */
export function contribution(weight: number, tf: number, length: number, normalisation: Normalisation): number {
  const exact = ((weight * tf) / (tf + normalisation.constant + normalisation.perTerm * length)) * 1e9;
  const rounded = Math.round(exact);
  return rounded - exact === 0.5 && rounded % 2 !== 0 ? rounded - 1 : rounded;
}

/** A score table grows once more than this share of its slots is taken (linear probing stays short below it). */
const MAX_LOAD = 0.75;

/**
 * Per-chunk sums of contributions: an open-addressing table keyed by chunk sequence number
 * (typed arrays, no object per chunk), sized for the postings expected and grown if they were
 * more.
 */
export class ScoreTable {
  private keys: Float64Array;
  private sums: Float64Array;
  private mask: number;
  /** Fibonacci hashing: the top bits of seq · 2^32/φ pick the slot. */
  private shift: number;
  private used = 0;

  constructor(expectedChunks: number) {
    let capacity = 64;
    while (capacity * MAX_LOAD < expectedChunks) capacity *= 2;
    this.keys = new Float64Array(capacity).fill(-1);
    this.sums = new Float64Array(capacity);
    this.mask = capacity - 1;
    this.shift = 32 - Math.log2(capacity);
  }

  /** Chunks with a sum. */
  get size(): number {
    return this.used;
  }

  add(seq: number, amount: number): void {
    const keys = this.keys;
    let slot = Math.imul(seq | 0, 0x9e3779b1) >>> this.shift;
    let key = keys[slot] as number;
    while (key !== seq) {
      if (key === -1) {
        keys[slot] = seq;
        this.sums[slot] = amount;
        if (++this.used > keys.length * MAX_LOAD) this.grow();
        return;
      }
      slot = (slot + 1) & this.mask;
      key = keys[slot] as number;
    }
    this.sums[slot] = (this.sums[slot] as number) + amount;
  }

  /** Adds every posting of a block, each weighted as `weight` (a query term's). */
  addBlock(bytes: Uint8Array, weight: number, normalisation: Normalisation): void {
    const end = bytes.length;
    let at = 0;
    // The common case inline: numbers below 2^21 (three bytes); anything longer takes readVarint.
    const state = { at: 0 };
    const next = (): number => {
      const first = bytes[at] as number;
      if (first < 0x80) {
        at += 1;
        return first;
      }
      const second = bytes[at + 1] as number;
      if (second < 0x80 && at + 1 < end) {
        at += 2;
        return (first & 0x7f) | (second << 7);
      }
      state.at = at;
      const value = readVarint(bytes, state);
      at = state.at;
      return value;
    };
    while (at < end) {
      const count = next();
      if (count === 0) throw new RangeError('Posting block holds an empty segment');
      let seq = 0;
      for (let index = 0; index < count; index++) {
        if (at >= end) throw new RangeError('Posting block ends inside a segment');
        seq += next();
        const tf = next();
        const length = next();
        this.add(seq, contribution(weight, tf, length, normalisation));
      }
    }
  }

  /** Every chunk with its sum (in 1e-9 units). */
  forEach(visit: (seq: number, sum: number) => void): void {
    const keys = this.keys;
    for (let slot = 0; slot < keys.length; slot++) {
      const key = keys[slot] as number;
      if (key !== -1) visit(key, this.sums[slot] as number);
    }
  }

  /**
   * The `limit` best chunks, best first: the highest sum, then (a tie) the lowest sequence number,
   * the chunk indexed first. A bounded heap over the table's slots, its root the worst entry kept:
   * one pass, and nothing allocated per chunk.
   */
  top(limit: number): Array<{ seq: number; sum: number }> {
    const size = Math.max(0, Math.min(limit, this.used));
    const seqs = new Float64Array(size);
    const sums = new Float64Array(size);
    // Whether entry (aSum, aSeq) ranks below (bSum, bSeq).
    const below = (aSum: number, aSeq: number, bSum: number, bSeq: number): boolean => aSum < bSum || (aSum === bSum && aSeq > bSeq);
    let filled = 0;
    const keys = this.keys;
    for (let slot = 0; slot < keys.length && size > 0; slot++) {
      const seq = keys[slot] as number;
      if (seq === -1) continue;
      const sum = this.sums[slot] as number;
      let at: number;
      if (filled < size) {
        // Sift the new entry up from the end.
        at = filled++;
        while (at > 0) {
          const parent = (at - 1) >> 1;
          if (!below(sum, seq, sums[parent] as number, seqs[parent] as number)) break;
          seqs[at] = seqs[parent] as number;
          sums[at] = sums[parent] as number;
          at = parent;
        }
      } else {
        if (!below(sums[0] as number, seqs[0] as number, sum, seq)) continue;
        // Replace the root and sift the new entry down.
        at = 0;
        for (;;) {
          const left = 2 * at + 1;
          if (left >= size) break;
          const right = left + 1;
          let child = left;
          if (right < size && below(sums[right] as number, seqs[right] as number, sums[left] as number, seqs[left] as number)) child = right;
          if (!below(sums[child] as number, seqs[child] as number, sum, seq)) break;
          seqs[at] = seqs[child] as number;
          sums[at] = sums[child] as number;
          at = child;
        }
      }
      seqs[at] = seq;
      sums[at] = sum;
    }
    const best: Array<{ seq: number; sum: number }> = [];
    for (let index = 0; index < filled; index++) best.push({ seq: seqs[index] as number, sum: sums[index] as number });
    return best.sort((a, b) => b.sum - a.sum || a.seq - b.seq);
  }

  private grow(): void {
    const { keys, sums } = this;
    this.keys = new Float64Array(keys.length * 2).fill(-1);
    this.sums = new Float64Array(keys.length * 2);
    this.mask = this.keys.length - 1;
    this.shift = 32 - Math.log2(this.keys.length);
    this.used = 0;
    for (let slot = 0; slot < keys.length; slot++) {
      const key = keys[slot] as number;
      if (key !== -1) this.add(key, sums[slot] as number);
    }
  }
}

/** A merge batch's chunk: its term hashes (pairs of halves: index/term-hashes.ts) and their frequencies. */
export interface ChunkTerms {
  readonly seq: number;
  readonly length: number;
  readonly hashes: Int32Array;
  readonly frequencies: Int32Array;
}

/** A merge batch's postings grouped by term, as groupPostings gives them: term by term, in arrays shared by all. */
interface GroupedPostings {
  readonly terms: number;
  /** Per term, its hash's halves, side by side (`[high₀, low₀, high₁, low₁, …]`). */
  readonly pairs: Int32Array;
  /** Per term, where its postings start in the arrays below, and where they end. */
  readonly starts: Int32Array;
  readonly ends: Int32Array;
  readonly seqs: Float64Array;
  readonly frequencies: Int32Array;
  readonly lengths: Int32Array;
}

/**
 * A merge batch's postings grouped by term, from its chunks (given in ascending `seq`), in an
 * open-addressing table keyed by the hashes' halves, in typed arrays: a JavaScript Map keyed by
 * decimal strings took about a microsecond a posting. A slot holds the halves and the term's id
 * side by side (one cache line per lookup). A term a chunk lists twice (two words whose hashes
 * collide, in chunks stored before ingestion summed them) counts once, with both frequencies.
 */
function groupPostings(chunks: readonly ChunkTerms[]): GroupedPostings {
  let capacity = 1024;
  // Per slot: high, low, the term's id + 1 (0: empty).
  let table = new Int32Array(3 * capacity);
  let shift = 32 - Math.log2(capacity);
  // Per term id, its halves.
  let pairs = new Int32Array(2048);
  let terms = 0;
  // Per posting, in chunk order: its term's id, chunk and frequency (the chunk's length by chunk).
  let postings = 0;
  for (const chunk of chunks) postings += chunk.frequencies.length;
  const postingTerms = new Int32Array(postings);
  const postingChunks = new Int32Array(postings);
  const postingFrequencies = new Int32Array(postings);
  let count = 0;

  const slotOf = (high: number, low: number): number => Math.imul(high ^ Math.imul(low, 0x85ebca6b), 0x9e3779b1) >>> shift;
  const grow = (): void => {
    const old = table;
    capacity *= 2;
    table = new Int32Array(3 * capacity);
    shift = 32 - Math.log2(capacity);
    for (let at = 0; at < old.length; at += 3) {
      if (old[at + 2] === 0) continue;
      let slot = slotOf(old[at] as number, old[at + 1] as number);
      while (table[3 * slot + 2] !== 0) slot = (slot + 1) & (capacity - 1);
      table[3 * slot] = old[at] as number;
      table[3 * slot + 1] = old[at + 1] as number;
      table[3 * slot + 2] = old[at + 2] as number;
    }
  };
  const idOf = (high: number, low: number): number => {
    let slot = slotOf(high, low);
    for (;;) {
      const at = 3 * slot;
      const id = table[at + 2] as number;
      if (id === 0) break;
      if (table[at] === high && table[at + 1] === low) return id - 1;
      slot = (slot + 1) & (capacity - 1);
    }
    const id = terms++;
    if (2 * id === pairs.length) pairs = grown(pairs);
    pairs[2 * id] = high;
    pairs[2 * id + 1] = low;
    table[3 * slot] = high;
    table[3 * slot + 1] = low;
    table[3 * slot + 2] = id + 1;
    if (terms * 4 > capacity * 3) grow();
    return id;
  };

  for (const [chunkIndex, chunk] of chunks.entries()) {
    const { hashes, frequencies } = chunk;
    if (hashes.length !== 2 * frequencies.length) throw new RangeError(`Chunk ${chunk.seq} has ${hashes.length / 2} terms and ${frequencies.length} frequencies`);
    for (let position = 0; position < frequencies.length; position++) {
      postingTerms[count] = idOf(hashes[2 * position] as number, hashes[2 * position + 1] as number);
      postingChunks[count] = chunkIndex;
      postingFrequencies[count] = frequencies[position] as number;
      count++;
    }
  }

  // Counting sort by term, keeping chunk order within each term.
  const starts = new Int32Array(terms + 1);
  for (let index = 0; index < count; index++) starts[(postingTerms[index] as number) + 1]++;
  for (let term = 0; term < terms; term++) starts[term + 1] = (starts[term + 1] as number) + (starts[term] as number);
  const filled = starts.slice(0, terms);
  const seqs = new Float64Array(count);
  const tfs = new Int32Array(count);
  const lengths = new Int32Array(count);
  for (let index = 0; index < count; index++) {
    const term = postingTerms[index] as number;
    const chunk = chunks[postingChunks[index] as number] as ChunkTerms;
    const at = filled[term]++ as number;
    seqs[at] = chunk.seq;
    tfs[at] = postingFrequencies[index] as number;
    lengths[at] = chunk.length;
  }
  // A chunk listing a term twice: its postings are adjacent; fold them into the first.
  const ends = new Int32Array(terms);
  for (let term = 0; term < terms; term++) {
    const start = starts[term] as number;
    const end = starts[term + 1] as number;
    let write = start;
    for (let read = start + 1; read < end; read++) {
      if (seqs[read] === seqs[write]) tfs[write] = (tfs[write] as number) + (tfs[read] as number);
      else {
        write++;
        seqs[write] = seqs[read] as number;
        tfs[write] = tfs[read] as number;
        lengths[write] = lengths[read] as number;
      }
    }
    ends[term] = write + 1;
  }
  return { terms, pairs: pairs.subarray(0, 2 * terms), starts, ends, seqs, frequencies: tfs, lengths };
}

/**
 * A merge batch's segments, one per term, written one after the other into one buffer: what the
 * merge's insert sends (each block's postings cut from it by offset), without an object, three
 * views and two buffers per term.
 */
export interface EncodedSegments {
  /** Terms, and so segments. */
  readonly count: number;
  /** Per term, its hash's halves side by side, as binaryBigintArray takes them. */
  readonly pairs: Int32Array;
  /** Per term, its first and last chunk, and its postings. */
  readonly firsts: Float64Array;
  readonly lasts: Float64Array;
  readonly sizes: Int32Array;
  /** Where each term's segment starts in `bytes` (`count + 1` of them: the last is the end). */
  readonly offsets: Int32Array;
  readonly bytes: Buffer;
}

function varintLength(value: number): number {
  let bytes = 1;
  for (let rest = value; rest >= 0x80; rest = Math.floor(rest / 0x80)) bytes++;
  return bytes;
}

/** encodeSegment of every term of the batch `chunks` (given in ascending `seq`; see groupPostings), in one buffer (see EncodedSegments). */
export function encodeSegmentsByTerm(chunks: readonly ChunkTerms[]): EncodedSegments {
  const { terms, pairs, starts, ends, seqs, frequencies, lengths } = groupPostings(chunks);
  const offsets = new Int32Array(terms + 1);
  const firsts = new Float64Array(terms);
  const lasts = new Float64Array(terms);
  const sizes = new Int32Array(terms);
  // The exact size first (checking every posting as encodeSegment does), then one buffer written once.
  let total = 0;
  for (let term = 0; term < terms; term++) {
    const start = starts[term] as number;
    const end = ends[term] as number;
    let bytes = varintLength(end - start);
    let previous = 0;
    for (let index = start; index < end; index++) {
      const seq = seqs[index] as number;
      assertWhole(seq, 'chunk', previous + 1);
      assertWhole(frequencies[index] as number, 'frequency', 1);
      assertWhole(lengths[index] as number, 'length', 0);
      bytes += varintLength(seq - previous) + varintLength(frequencies[index] as number) + varintLength(lengths[index] as number);
      previous = seq;
    }
    offsets[term] = total;
    firsts[term] = seqs[start] as number;
    lasts[term] = seqs[end - 1] as number;
    sizes[term] = end - start;
    total += bytes;
  }
  // Offsets are 32-bit, as PostgreSQL's substring takes them: a batch's postings stay far below.
  if (total > 0x7fffffff) throw new RangeError(`A merge batch's segments take ${total} bytes, more than one statement's parameter can hold`);
  offsets[terms] = total;
  const out = Buffer.allocUnsafe(total);
  let at = 0;
  for (let term = 0; term < terms; term++) {
    const start = starts[term] as number;
    const end = ends[term] as number;
    at = writeVarint(out, at, end - start);
    let previous = 0;
    for (let index = start; index < end; index++) {
      const seq = seqs[index] as number;
      at = writeVarint(out, at, seq - previous);
      at = writeVarint(out, at, frequencies[index] as number);
      at = writeVarint(out, at, lengths[index] as number);
      previous = seq;
    }
  }
  if (at !== total) throw new Error(`Segments took ${at} bytes, not the ${total} counted`);
  return { count: terms, pairs, firsts, lasts, sizes, offsets, bytes: out };
}

/** The segments `indices` (ascending) of `encoded`, in a set of their own. */
export function selectSegments(encoded: EncodedSegments, indices: readonly number[]): EncodedSegments {
  const count = indices.length;
  const selected = {
    pairs: new Int32Array(2 * count),
    firsts: new Float64Array(count),
    lasts: new Float64Array(count),
    sizes: new Int32Array(count),
    offsets: new Int32Array(count + 1),
  };
  const parts: Buffer[] = [];
  let total = 0;
  for (const [at, index] of indices.entries()) {
    if (!Number.isInteger(index) || index < 0 || index >= encoded.count || (at > 0 && index <= (indices[at - 1] as number)))
      throw new RangeError(`No segment ${index} to select there`);
    selected.pairs[2 * at] = encoded.pairs[2 * index] as number;
    selected.pairs[2 * at + 1] = encoded.pairs[2 * index + 1] as number;
    selected.firsts[at] = encoded.firsts[index] as number;
    selected.lasts[at] = encoded.lasts[index] as number;
    selected.sizes[at] = encoded.sizes[index] as number;
    selected.offsets[at] = total;
    const bytes = encoded.bytes.subarray(encoded.offsets[index], encoded.offsets[index + 1]);
    parts.push(bytes);
    total += bytes.length;
  }
  selected.offsets[count] = total;
  return { count, ...selected, bytes: Buffer.concat(parts, total) };
}

function grown(array: Int32Array<ArrayBuffer>): Int32Array<ArrayBuffer> {
  const larger = new Int32Array(array.length * 2);
  larger.set(array);
  return larger;
}

/** The elements of a PostgreSQL integer array's text form (`{1,-2,3}`): safe whole numbers only. */
export function wholeNumbers(text: string): number[] {
  if (!text.startsWith('{') || !text.endsWith('}')) throw new RangeError(`Not an array: ${text.slice(0, 32)}`);
  const inner = text.slice(1, -1);
  if (inner === '') return [];
  return inner.split(',').map((element) => {
    const value = Number(element);
    if (!/^-?\d{1,16}$/.test(element) || !Number.isSafeInteger(value)) throw new RangeError(`Not a whole number: ${element.slice(0, 32)}`);
    return value;
  });
}
