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
 * What a token of the default analysis becomes: its term, or null (a stop word, too long, or
 * nothing left). Text is Zipfian: most tokens were seen before, and one lookup replaces the stop
 * word checks, the apostrophe handling and the stem lookup. Only tokens that yield at most one
 * term (no unspaced script) are kept.
 */
const TOKEN_CACHE_LIMIT = 200_000;
const tokenTerms = new Map<string, string | null>();

function addToken(token: string, terms: string[], stopwords: ReadonlySet<string>): void {
  const cacheable = stopwords === ENGLISH_STOPWORDS;
  if (cacheable) {
    const known = tokenTerms.get(token);
    if (known !== undefined) {
      if (known !== null) terms.push(known);
      return;
    }
  }
  // Fast path: the scripts split per character all lie above U+2E80.
  if (!/[\u2e80-\uffff]/.test(token) || !UNSPACED.test(token)) {
    const before = terms.length;
    addWord(token, terms, stopwords);
    // Longer tokens are never terms (nor repeated, mostly: hashes, base64): not worth keeping.
    if (cacheable && token.length <= MAX_TOKEN_LENGTH + 2) {
      if (tokenTerms.size >= TOKEN_CACHE_LIMIT) tokenTerms.clear();
      tokenTerms.set(detached(token), terms.length > before ? (terms[before] as string) : null);
    }
    return;
  }
  for (const part of token.split(UNSPACED_SPLIT)) {
    if (part.length === 0) continue;
    if (UNSPACED.test(part)) terms.push(part);
    else addWord(part, terms, stopwords);
  }
}

/**
 * The index terms of a text, in order, repeats kept: NFKC, lower case, words (letters, digits,
 * marks; apostrophes inside words), English stop words removed, possessive "'s" dropped, Porter
 * stems for English words. Han, Hiragana and Katakana characters are terms one by one. Documents
 * and queries go through this same function, so whatever it does to one it does to the other.
 * `stopwords` (lower case, NFKC) replaces the English list only for the evaluation's comparisons
 * of analysis choices; the service always uses the default.
 */
export function analyze(text: string, stopwords: ReadonlySet<string> = ENGLISH_STOPWORDS): string[] {
  const terms: string[] = [];
  const normalized = normalizeText(text);
  WORD.lastIndex = 0;
  for (let match = WORD.exec(normalized); match !== null; match = WORD.exec(normalized)) addToken(match[0], terms, stopwords);
  return terms;
}

/** Term frequencies of a list of terms. */
export function termFrequencies(terms: readonly string[]): Map<string, number> {
  const frequencies = new Map<string, number>();
  for (const term of terms) frequencies.set(term, (frequencies.get(term) ?? 0) + 1);
  return frequencies;
}
