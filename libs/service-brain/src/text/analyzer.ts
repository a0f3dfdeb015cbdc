import { randomInt } from 'node:crypto';
import { stemmer } from 'stemmer';
import { ENGLISH_STOPWORDS } from './stopwords';

/** Longer tokens (hashes, base64 runs) are noise for retrieval and are not indexed. */
export const MAX_TOKEN_LENGTH = 64;

/** Runs of letters, digits and combining marks, with inner apostrophes ("don't", "o'neill"). */
const WORD = /[\p{L}\p{N}\p{M}]+(?:'[\p{L}\p{N}\p{M}]+)*/gu;
/** Scripts written without spaces between words: each character is a term of its own. */
const UNSPACED = /[\p{sc=Han}\p{sc=Hiragana}\p{sc=Katakana}]/u;
const UNSPACED_SPLIT = /([\p{sc=Han}\p{sc=Hiragana}\p{sc=Katakana}])/u;
const ENGLISH_WORD = /^[a-z]+$/;
const APOSTROPHES = /[\u2018\u2019\u02bc\uff07]/g;

const STEM_CACHE_LIMIT = 100_000;
const stems = new Map<string, string>();

/**
 * A copy of `text` that holds on to nothing else. A word matched in a text may be a slice of it,
 * which keeps the whole text alive as long as the word is: a cache of such words would keep the
 * texts they came from.
 */
function detached(text: string): string {
  return (text + ' ').slice(0, -1);
}

function stem(word: string): string {
  let stemmed = stems.get(word);
  if (stemmed === undefined) {
    // The Porter algorithm is defined for English words; anything else is kept as it is.
    stemmed = detached(ENGLISH_WORD.test(word) ? stemmer(word) : word);
    if (stems.size >= STEM_CACHE_LIMIT) stems.clear();
    stems.set(detached(word), stemmed);
  }
  return stemmed;
}

/** Unicode compatibility normalisation (NFKC), lower case, one kind of apostrophe. */
export function normalizeText(text: string): string {
  return text.normalize('NFKC').toLowerCase().replace(APOSTROPHES, "'");
}

function addWord(token: string, terms: string[], stopwords: ReadonlySet<string>): void {
  if (stopwords.has(token)) return;
  const word = token.endsWith("'s") ? token.slice(0, -2).replace(/'/g, '') : token.replace(/'/g, '');
  if (word.length === 0 || word.length > MAX_TOKEN_LENGTH || stopwords.has(word)) return;
  terms.push(stem(word));
}

/**
 * Appends the terms of one token, looked up nowhere: a stop word, too long, or nothing left gives
 * none; a token of an unspaced script (Han, Hiragana, Katakana) one per such character and one per
 * run of anything else.
 */
function addTokenTerms(token: string, terms: string[], stopwords: ReadonlySet<string>): void {
  // Fast path: the scripts split per character all lie above U+2E80.
  if (!/[\u2e80-\uffff]/.test(token) || !UNSPACED.test(token)) {
    addWord(token, terms, stopwords);
    return;
  }
  for (const part of token.split(UNSPACED_SPLIT)) {
    if (part.length === 0) continue;
    if (UNSPACED.test(part)) terms.push(part);
    else addWord(part, terms, stopwords);
  }
}

/** Tokens (and terms) the dictionary holds at most; past it, it starts again empty. */
const DICTIONARY_LIMIT = 200_000;

/** Longer tokens are never terms (nor repeated, mostly: hashes, base64): not worth keeping. */
const LONGEST_KEPT_TOKEN = MAX_TOKEN_LENGTH + 2;

const NOT_FOUND = -1;
/** A kept token's term when it gives none (a stop word, nothing left). */
const NO_TERM = -1;
/** Slots a lookup visits at most: a token that would lie further from its own is not kept (and is analysed each time instead). */
export const MAX_PROBES = 32;

const INITIAL_SLOTS = 1 << 16;
/** TokenDictionary's table and characters to start with (256 KiB and 128 KiB): a process that analyses little keeps little. */
const INITIAL_TOKEN_SLOTS = 1 << 14;
const INITIAL_TOKEN_CHARS = 1 << 16;

function grown(array: Int32Array, least: number): Int32Array<ArrayBuffer> {
  let size = array.length * 2;
  while (size < least) size *= 2;
  const larger = new Int32Array(size);
  larger.set(array);
  return larger;
}

/**
 * FNV-1a's offset basis mixed with a secret drawn at start: which tokens share slots differs from
 * process to process, so no document can be written to fill one run of slots (as V8's own hash
 * seed keeps a Map's). MAX_PROBES bounds a lookup whatever the text.
 */
const HASH_SEED = (0x811c9dc5 ^ randomInt(0, 2 ** 32 - 1)) | 0;

/** FNV-1a's running value after one more UTF-16 unit. */
function step(hash: number, unit: number): number {
  return Math.imul(hash ^ unit, 0x01000193);
}

/** Spreads a hash's high bits over the low ones a table uses. */
function mix(hash: number): number {
  return (hash ^ (hash >>> 15)) >>> 0;
}

function hashOf(text: string, start: number, end: number): number {
  let hash = HASH_SEED;
  for (let at = start; at < end; at++) hash = step(hash, text.charCodeAt(at));
  return hash;
}

/** Int32s per slot of TokenDictionary's table: the token's hash, its term's number, where its characters start, and how many. */
const SLOT_WIDTH = 4;
const SLOT_TERM = 1;
const SLOT_FROM = 2;
/** A slot whose token length is 0 is empty (no token is). */
const SLOT_LENGTH = 3;

/**
 * The tokens of the default analysis seen so far, each with its term (or none), and the terms by
 * number. Text is Zipfian: most tokens were seen before, and one lookup replaces the stop word
 * checks, the apostrophe handling and the stem. A token is found by its characters where they lie
 * in the text, in an open-addressing table of numbers: no string is made or hashed for it (a Map
 * keyed by freshly matched strings cost about 0.3 µs a token here, most of the analysis). Only
 * tokens that give at most one term (no unspaced script) and are not too long are kept.
 * A slot holds everything a lookup reads (the hash, the term, where the token's characters lie in
 * one array of them, and their number), so a lookup touches its slot and those characters and
 * nothing else: with the hashes, terms and tokens (as strings) in arrays of their own, a lookup
 * was three or four cache misses, most of the analysis's time.
 */
export class TokenDictionary {
  private slots = new Int32Array(SLOT_WIDTH * INITIAL_TOKEN_SLOTS);
  private mask = INITIAL_TOKEN_SLOTS - 1;
  /** The kept tokens' characters, one after the other. */
  private chars = new Uint16Array(INITIAL_TOKEN_CHARS);
  private charsUsed = 0;
  private tokenCount = 0;
  private readonly terms: string[] = [];
  private readonly termNumbers = new Map<string, number>();

  /** Changes whenever the dictionary starts again empty: term numbers of another generation mean other terms. */
  generation = 0;

  /** `limit`: tokens (and terms) kept at most (DICTIONARY_LIMIT; smaller in tests). */
  constructor(private readonly limit = DICTIONARY_LIMIT) {}

  /** Tokens kept. */
  get size(): number {
    return this.tokenCount;
  }

  /** Called before an analysis: empties the dictionary when it is full. Term numbers given before are void afterwards. */
  startAnalysis(): void {
    if (this.tokenCount < this.limit && this.terms.length < this.limit) return;
    this.generation++;
    this.slots = new Int32Array(SLOT_WIDTH * INITIAL_TOKEN_SLOTS);
    this.mask = INITIAL_TOKEN_SLOTS - 1;
    this.chars = new Uint16Array(INITIAL_TOKEN_CHARS);
    this.charsUsed = 0;
    this.tokenCount = 0;
    this.terms.length = 0;
    this.termNumbers.clear();
  }

  term(number: number): string {
    return this.terms[number] as string;
  }

  /** The kept token `text[start, end)` (its hash: `hash`), as a handle for termOf (valid until the next add), or NOT_FOUND. */
  find(text: string, start: number, end: number, hash: number): number {
    const length = end - start;
    const slots = this.slots;
    for (let probe = 0, slot = mix(hash) & this.mask; probe < MAX_PROBES; probe++, slot = (slot + 1) & this.mask) {
      const at = SLOT_WIDTH * slot;
      const kept = slots[at + SLOT_LENGTH] as number;
      if (kept === 0) return NOT_FOUND;
      if (slots[at] !== hash || kept !== length) continue;
      const chars = this.chars;
      const from = slots[at + SLOT_FROM] as number;
      let index = 0;
      while (index < length && chars[from + index] === text.charCodeAt(start + index)) index++;
      if (index === length) return slot;
    }
    return NOT_FOUND;
  }

  /** The term a kept token (find's or add's handle) gives, as a number, or NO_TERM. */
  termOf(handle: number): number {
    return this.slots[SLOT_WIDTH * handle + SLOT_TERM] as number;
  }

  /**
   * Keeps `token` (its hash: `hash`; not kept yet) with the term it gives, or null; returns its
   * handle (valid until the next add), or NOT_FOUND when its slot would lie more than MAX_PROBES
   * from its own (not kept).
   */
  add(token: string, hash: number, term: string | null): number {
    // At most half the slots taken: probes stay short.
    if (2 * (this.tokenCount + 1) > this.mask + 1) this.rehash(2 * (this.mask + 1));
    let slot = mix(hash) & this.mask;
    for (let probe = 0; (this.slots[SLOT_WIDTH * slot + SLOT_LENGTH] as number) !== 0; probe++, slot = (slot + 1) & this.mask) if (probe + 1 >= MAX_PROBES) return NOT_FOUND;
    if (this.charsUsed + token.length > this.chars.length) {
      let size = this.chars.length * 2;
      while (size < this.charsUsed + token.length) size *= 2;
      const larger = new Uint16Array(size);
      larger.set(this.chars.subarray(0, this.charsUsed));
      this.chars = larger;
    }
    const from = this.charsUsed;
    for (let index = 0; index < token.length; index++) this.chars[from + index] = token.charCodeAt(index);
    this.charsUsed += token.length;
    const at = SLOT_WIDTH * slot;
    this.slots[at] = hash;
    this.slots[at + SLOT_TERM] = term === null ? NO_TERM : this.numberOf(term);
    this.slots[at + SLOT_FROM] = from;
    this.slots[at + SLOT_LENGTH] = token.length;
    this.tokenCount++;
    return slot;
  }

  /** The term's number, given it if it has none yet. */
  numberOf(term: string): number {
    let number = this.termNumbers.get(term);
    if (number === undefined) {
      number = this.terms.length;
      const kept = detached(term);
      this.terms.push(kept);
      this.termNumbers.set(kept, number);
    }
    return number;
  }

  private rehash(size: number): void {
    const old = this.slots;
    this.slots = new Int32Array(SLOT_WIDTH * size);
    this.mask = size - 1;
    for (let at = 0; at < old.length; at += SLOT_WIDTH) {
      if ((old[at + SLOT_LENGTH] as number) === 0) continue;
      let slot = mix(old[at] as number) & this.mask;
      while ((this.slots[SLOT_WIDTH * slot + SLOT_LENGTH] as number) !== 0) slot = (slot + 1) & this.mask;
      this.slots.set(old.subarray(at, at + SLOT_WIDTH), SLOT_WIDTH * slot);
    }
  }
}

const dictionary = new TokenDictionary();

/** An ASCII letter or digit: all that \p{L}, \p{N} and \p{M} hold below U+0080. */
function isAsciiWordUnit(unit: number): boolean {
  return (unit >= 0x61 && unit <= 0x7a) || (unit >= 0x30 && unit <= 0x39) || (unit >= 0x41 && unit <= 0x5a);
}

const APOSTROPHE = 0x27;

/**
 * Calls `use` with the number of each term of `normalized` (normalizeText's), in order: the terms
 * of WORD's matches as addTokenTerms gives them with the English stop words. A run of ASCII
 * letters and digits is a token found by scanning; where a token may go on past one (a character
 * above U+007F, an apostrophe), or where a character above U+007F comes between tokens, WORD
 * itself says where the next token lies. Synchronous: numbers stay valid until the next
 * startAnalysis.
 */
function eachTerm(normalized: string, use: (term: number) => void): void {
  const length = normalized.length;
  let at = 0;
  while (at < length) {
    const unit = normalized.charCodeAt(at);
    if (unit < 0x80 && !isAsciiWordUnit(unit)) {
      at++;
      continue;
    }
    let start = at;
    let end = -1;
    let hash = HASH_SEED;
    if (unit < 0x80) {
      let next = unit;
      let scanned = at;
      while (scanned < length && next < 0x80 && isAsciiWordUnit(next)) {
        hash = step(hash, next);
        next = normalized.charCodeAt(++scanned);
      }
      if (scanned === length || (next < 0x80 && next !== APOSTROPHE)) end = scanned;
    }
    if (end === -1) {
      WORD.lastIndex = at;
      const match = WORD.exec(normalized);
      if (match === null) return;
      start = match.index;
      end = start + match[0].length;
      hash = hashOf(normalized, start, end);
    }
    at = end;
    let entry = dictionary.find(normalized, start, end, hash);
    if (entry === NOT_FOUND) {
      const token = normalized.slice(start, end);
      const terms: string[] = [];
      addTokenTerms(token, terms, ENGLISH_STOPWORDS);
      if (terms.length > 1 || token.length > LONGEST_KEPT_TOKEN) {
        for (const term of terms) use(dictionary.numberOf(term));
        continue;
      }
      entry = dictionary.add(token, hash, terms[0] ?? null);
      if (entry === NOT_FOUND) {
        if (terms[0] !== undefined) use(dictionary.numberOf(terms[0]));
        continue;
      }
    }
    const term = dictionary.termOf(entry);
    if (term !== NO_TERM) use(term);
  }
}

/**
 * The index terms of a text, in order, repeats kept: NFKC, lower case, words (letters, digits,
 * marks; apostrophes inside words), English stop words removed, possessive "'s" dropped, Porter
 * stems for English words. Han, Hiragana and Katakana characters are terms one by one. Documents
 * and queries go through this same analysis (termCounts counts what it gives), so whatever it
 * does to one it does to the other. `stopwords` (lower case, NFKC) replaces the English list only
 * for the evaluation's comparisons of analysis choices; the service always uses the default.
 */
export function analyze(text: string, stopwords: ReadonlySet<string> = ENGLISH_STOPWORDS): string[] {
  const terms: string[] = [];
  const normalized = normalizeText(text);
  if (stopwords === ENGLISH_STOPWORDS) {
    dictionary.startAnalysis();
    eachTerm(normalized, (term) => terms.push(dictionary.term(term)));
    return terms;
  }
  WORD.lastIndex = 0;
  for (let match = WORD.exec(normalized); match !== null; match = WORD.exec(normalized)) addTokenTerms(match[0], terms, stopwords);
  return terms;
}

/** Per term number, how often the texts termCounts is counting hold it; all zero between counts. */
let counts = new Int32Array(INITIAL_SLOTS / 2);

/**
 * The term frequencies of the texts together, in the order the terms first occur: what
 * `termFrequencies([...analyze(a), ...analyze(b), …])` gives, without listing the terms.
 */
export function termCounts(...texts: string[]): Map<string, number> {
  const frequencies = new Map<string, number>();
  eachTermCount(texts, (term, count) => frequencies.set(term, count));
  return frequencies;
}

/**
 * termCounts' terms and counts, each given to `visit` with the term's number in the process's
 * dictionary and that numbering's generation: a cache keyed by the number (an array index instead
 * of a map's lookup) holds while the generation stays the same. Numbers are given anew only
 * between two calls.
 */
export function eachTermCount(texts: readonly string[], visit: (term: string, count: number, number: number, generation: number) => void): void {
  dictionary.startAnalysis();
  const seen: number[] = [];
  const count = (term: number): void => {
    if (term >= counts.length) counts = grown(counts, term + 1);
    if (counts[term] === 0) seen.push(term);
    counts[term] = (counts[term] as number) + 1;
  };
  try {
    for (const text of texts) eachTerm(normalizeText(text), count);
    for (const term of seen) visit(dictionary.term(term), counts[term] as number, term, dictionary.generation);
  } finally {
    // All zero again for the next count, whatever happened.
    for (const term of seen) counts[term] = 0;
  }
}

/** Term frequencies of a list of terms. */
export function termFrequencies(terms: readonly string[]): Map<string, number> {
  const frequencies = new Map<string, number>();
  for (const term of terms) frequencies.set(term, (frequencies.get(term) ?? 0) + 1);
  return frequencies;
}
