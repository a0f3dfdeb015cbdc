export interface ChunkingOptions {
  /** No chunk is longer than this (characters, overlap included). */
  readonly maxChars: number;
  /** A chunk at least this long ends at a paragraph break rather than taking the next paragraph in. */
  readonly preferredChars: number;
  /** At most this much of the end of a chunk is repeated at the start of the next, within a paragraph. */
  readonly overlapChars: number;
}

export const DEFAULT_CHUNKING: ChunkingOptions = { maxChars: 1_500, preferredChars: 900, overlapChars: 200 };

interface Piece {
  readonly text: string;
  /** First piece of its paragraph. */
  readonly opensParagraph: boolean;
}

/** Sentence ends: terminal punctuation (with closing quotes or brackets) followed by white space. */
const SENTENCE_END = /(?<=[.!?…。！？]["'’”)\]]*)\s+/u;

/** Splits text longer than `max` at white space, or anywhere when a single word is longer. */
function splitLong(text: string, max: number): string[] {
  const parts: string[] = [];
  let rest = text;
  while (rest.length > max) {
    const space = rest.lastIndexOf(' ', max);
    const cut = space > max / 2 ? space : max;
    parts.push(rest.slice(0, cut).trimEnd());
    rest = rest.slice(cut).trimStart();
  }
  if (rest.length > 0) parts.push(rest);
  return parts;
}

/** Paragraphs (blank lines) → sentences → pieces no longer than `max`, white space collapsed. */
function pieces(content: string, max: number): Piece[] {
  const result: Piece[] = [];
  for (const paragraph of content.replace(/\r\n?/g, '\n').split(/\n[ \t\f\v]*\n/)) {
    const flat = paragraph.replace(/\s+/g, ' ').trim();
    if (flat.length === 0) continue;
    let opensParagraph = true;
    for (const sentence of flat.split(SENTENCE_END)) {
      for (const part of splitLong(sentence, max)) {
        if (part.length === 0) continue;
        result.push({ text: part, opensParagraph });
        opensParagraph = false;
      }
    }
  }
  return result;
}

/** The end of a chunk to repeat at the start of the next: whole sentences if they fit, else its last words. */
function overlapOf(chunk: Piece[], overlapChars: number): Piece[] {
  const carried: Piece[] = [];
  let length = 0;
  for (let index = chunk.length - 1; index >= 0; index--) {
    const piece = chunk[index];
    if (length + piece.text.length + 1 > overlapChars) {
      if (carried.length === 0) {
        const tail = piece.text.slice(-overlapChars);
        const words = tail.slice(tail.indexOf(' ') + 1);
        if (words.length > 0 && words.length < piece.text.length) carried.unshift({ text: words, opensParagraph: false });
      }
      break;
    }
    carried.unshift(piece);
    length += piece.text.length + 1;
    if (piece.opensParagraph) break;
  }
  return carried;
}

function joined(chunk: readonly Piece[]): string {
  return chunk.map((piece, index) => (index === 0 ? piece.text : `${piece.opensParagraph ? '\n\n' : ' '}${piece.text}`)).join('');
}

function lengthOf(chunk: readonly Piece[]): number {
  return chunk.reduce((sum, piece, index) => sum + piece.text.length + (index === 0 ? 0 : piece.opensParagraph ? 2 : 1), 0);
}

/**
 * Cuts a document into passages for retrieval. Paragraphs (blank-line separated) and sentences
 * are kept whole where they fit; a chunk prefers to end at a paragraph break once it is
 * `preferredChars` long and never exceeds `maxChars`; when a chunk ends inside a paragraph, the
 * next one starts with up to `overlapChars` of its end, so a sentence cut at the boundary is still
 * found with its context. White space inside a paragraph is collapsed; paragraphs are separated
 * by a blank line.
 */
export function chunkText(content: string, options: ChunkingOptions = DEFAULT_CHUNKING): string[] {
  const chunks: string[] = [];
  let current: Piece[] = [];
  for (const piece of pieces(content, options.maxChars - options.overlapChars - 1)) {
    const length = lengthOf(current);
    const separator = piece.opensParagraph ? 2 : 1;
    const full = length > 0 && length + separator + piece.text.length > options.maxChars;
    const paragraphBreak = piece.opensParagraph && length >= options.preferredChars;
    if (full || paragraphBreak) {
      chunks.push(joined(current));
      current = piece.opensParagraph ? [] : overlapOf(current, options.overlapChars);
    }
    current.push(current.length === 0 ? { ...piece, opensParagraph: true } : piece);
  }
  if (current.length > 0) chunks.push(joined(current));
  return chunks;
}
