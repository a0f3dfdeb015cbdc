import { eachTermCount } from '../text/analyzer';
import type { TermHasher } from './blind-index';

/** A chunk's index terms: its distinct term hashes as pairs of halves (term-hashes.ts), each one's frequency, and its length in terms. */
export interface ChunkTermList {
  readonly hashes: Int32Array;
  readonly frequencies: Int32Array;
  readonly length: number;
}

/** Per slot (TermHasher.numberedSlot): the call that last met it (`mark`), and where its frequency went. */
let marks = new Int32Array(1024);
let positions = new Int32Array(1024);
let mark = 0;
let scratchHashes = new Int32Array(2048);
let scratchFrequencies = new Int32Array(1024);

function grownTo(array: Int32Array<ArrayBuffer>, size: number): Int32Array<ArrayBuffer> {
  let length = array.length;
  while (length < size) length *= 2;
  const larger = new Int32Array(length);
  larger.set(array);
  return larger;
}

/**
 * The index terms of `texts` together (eachTermCount's) under the tenant's keyed hashes: each
 * distinct hash once, in the order its first term occurs, with the frequencies of the terms that
 * give it summed (two terms whose hashes collide count as one, as a query counts them). The
 * arrays are the chunk's own (not views of a larger buffer), so what keeps them is charged for
 * what they hold.
 */
export function chunkTerms(hasher: TermHasher, texts: readonly string[]): ChunkTermList {
  if (mark === 0x7fffffff) {
    marks.fill(0);
    mark = 0;
  }
  const current = ++mark;
  let count = 0;
  let length = 0;
  eachTermCount(texts, (term, tf, number, generation) => {
    const slot = hasher.numberedSlot(term, number, generation);
    length += tf;
    if (slot >= marks.length) {
      marks = grownTo(marks, slot + 1);
      positions = grownTo(positions, slot + 1);
    }
    if (marks[slot] === current) {
      const at = positions[slot] as number;
      scratchFrequencies[at] = (scratchFrequencies[at] as number) + tf;
      return;
    }
    marks[slot] = current;
    positions[slot] = count;
    if (count === scratchFrequencies.length) {
      scratchFrequencies = grownTo(scratchFrequencies, count + 1);
      scratchHashes = grownTo(scratchHashes, 2 * scratchFrequencies.length);
    }
    scratchHashes[2 * count] = hasher.high(slot);
    scratchHashes[2 * count + 1] = hasher.low(slot);
    scratchFrequencies[count] = tf;
    count++;
  });
  return { hashes: scratchHashes.slice(0, 2 * count), frequencies: scratchFrequencies.slice(0, count), length };
}
