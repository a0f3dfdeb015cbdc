import { chunkText, DEFAULT_CHUNKING } from './chunker';

const small = { maxChars: 100, preferredChars: 60, overlapChars: 30 };

function sentence(n: number, words = 6): string {
  return `${Array.from({ length: words }, (_, i) => `w${n}x${i}`).join(' ')}.`;
}

describe('chunkText', () => {
  it('keeps a short document in one chunk with its white space collapsed', () => {
    expect(chunkText('  A short\n document,\twith   odd spacing.  ')).toEqual(['A short document, with odd spacing.']);
  });

  it('keeps paragraphs apart with a blank line inside a chunk', () => {
    expect(chunkText('First paragraph.\n\nSecond paragraph.\r\n\r\nThird.')).toEqual(['First paragraph.\n\nSecond paragraph.\n\nThird.']);
  });

  it('never exceeds the maximum, overlap included', () => {
    const text = Array.from({ length: 200 }, (_, n) => sentence(n, 1 + (n % 9))).join(' ');
    const chunks = chunkText(text, small);
    expect(chunks.length).toBeGreaterThan(10);
    for (const chunk of chunks) expect(chunk.length).toBeLessThanOrEqual(small.maxChars);
  });

  it('ends chunks at sentence boundaries and repeats the last sentence when it fits the overlap', () => {
    const sentences = Array.from({ length: 12 }, (_, n) => sentence(n, 3));
    const chunks = chunkText(sentences.join(' '), small);
    for (const chunk of chunks) expect(chunk.endsWith('.')).toBe(true);
    for (let index = 1; index < chunks.length; index++) {
      const previousLast = chunks[index - 1]?.split(/(?<=\.) /).pop() ?? '';
      expect(chunks[index]?.startsWith(previousLast)).toBe(true);
      expect(previousLast.length).toBeLessThanOrEqual(small.overlapChars);
    }
    // Every sentence is in some chunk.
    for (const s of sentences) expect(chunks.some((chunk) => chunk.includes(s))).toBe(true);
  });

  it('prefers to end a long enough chunk at a paragraph break, and does not overlap across it', () => {
    const first = [sentence(1), sentence(2)].join(' ');
    const second = [sentence(3), sentence(4)].join(' ');
    const chunks = chunkText(`${first}\n\n${second}`, small);
    expect(first.length).toBeGreaterThanOrEqual(small.preferredChars);
    expect(chunks).toEqual([first, second]);
  });

  it('splits an over-long sentence at white space and a word with no spaces anywhere', () => {
    const longSentence = Array.from({ length: 60 }, (_, i) => `word${i}`).join(' ');
    const chunks = chunkText(longSentence, small);
    for (const chunk of chunks) expect(chunk.length).toBeLessThanOrEqual(small.maxChars);
    expect(chunks.join(' ')).toContain('word59');
    const blob = 'x'.repeat(1_000);
    const blobChunks = chunkText(blob, small);
    for (const chunk of blobChunks) expect(chunk.length).toBeLessThanOrEqual(small.maxChars);
    expect(blobChunks.join('').replace(/ /g, '').length).toBeGreaterThanOrEqual(1_000);
  });

  it('returns nothing for white space only', () => {
    expect(chunkText(' \n\n \t ')).toEqual([]);
  });

  it('has sensible defaults: passages of up to 1,500 characters with up to 200 of overlap', () => {
    expect(DEFAULT_CHUNKING).toEqual({ maxChars: 1_500, preferredChars: 900, overlapChars: 200 });
    const text = Array.from({ length: 2_000 }, (_, n) => sentence(n)).join(' ');
    const chunks = chunkText(text);
    for (const chunk of chunks) expect(chunk.length).toBeLessThanOrEqual(1_500);
    expect(chunks.length).toBeGreaterThan(text.length / 1_500);
  });
});
