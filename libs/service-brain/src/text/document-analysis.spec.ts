import { randomBytes } from 'node:crypto';
import { TermHasher } from '../index/blind-index';
import { chunkTerms } from '../index/chunk-terms';
import { chunkText, DEFAULT_CHUNKING } from './chunker';
import { analyseDocument, packAnalysis, unpackAnalysis } from './document-analysis';

const paragraph = (n: number): string => `Paragraph ${n}: klystrons and magnetrons amplify microwave signals in radar transmitters. `.repeat(14);
const content = Array.from({ length: 12 }, (_, n) => paragraph(n)).join('\n\n');

describe('analyseDocument', () => {
  it('gives each passage of chunkText with the terms of its text and the title, as chunkTerms gives them', async () => {
    const hasher = new TermHasher(randomBytes(32));
    const chunks = await analyseDocument(hasher, content, 'Tubes', DEFAULT_CHUNKING);
    const texts = chunkText(content, DEFAULT_CHUNKING);
    expect(chunks.map((chunk) => chunk.text)).toEqual(texts);
    expect(texts.length).toBeGreaterThan(3);
    for (const [index, chunk] of chunks.entries()) {
      const expected = chunkTerms(hasher, [texts[index] as string, 'Tubes']);
      expect([...chunk.hashes]).toEqual([...expected.hashes]);
      expect([...chunk.frequencies]).toEqual([...expected.frequencies]);
      expect(chunk.length).toBe(expected.length);
    }
    expect(await analyseDocument(hasher, content, 'Tubes', DEFAULT_CHUNKING, false)).toEqual(chunks);
  });
});

describe('packAnalysis and unpackAnalysis', () => {
  it('give back every chunk as it was, its arrays views of the packed ones (nothing copied)', async () => {
    const chunks = await analyseDocument(new TermHasher(randomBytes(32)), content, 'Tubes', DEFAULT_CHUNKING);
    const withEmpty = [...chunks, { text: '…', length: 0, hashes: new Int32Array(0), frequencies: new Int32Array(0) }];
    const packed = packAnalysis(withEmpty);
    const unpacked = unpackAnalysis(packed);
    expect(unpacked).toEqual(withEmpty);
    for (const chunk of unpacked) {
      expect(chunk.hashes.buffer).toBe(packed.hashes.buffer);
      expect(chunk.frequencies.buffer).toBe(packed.frequencies.buffer);
    }
    expect(unpackAnalysis(packAnalysis([]))).toEqual([]);
  });

  it('refuse a packed analysis whose arrays do not add up', async () => {
    const packed = packAnalysis(await analyseDocument(new TermHasher(randomBytes(32)), content, 'Tubes', DEFAULT_CHUNKING));
    expect(() => unpackAnalysis({ ...packed, lengths: packed.lengths.subarray(1) })).toThrow(RangeError);
    expect(() => unpackAnalysis({ ...packed, counts: packed.counts.subarray(1) })).toThrow(RangeError);
    expect(() => unpackAnalysis({ ...packed, frequencies: packed.frequencies.subarray(1) })).toThrow(/counts \d+ terms/);
    expect(() => unpackAnalysis({ ...packed, hashes: packed.hashes.subarray(2) })).toThrow(/counts \d+ terms/);
    const negative = Int32Array.from(packed.counts);
    negative[0] = -1;
    negative[1] = (negative[1] as number) + (packed.counts[0] as number) + 1;
    expect(() => unpackAnalysis({ ...packed, counts: negative })).toThrow(/fewer than no terms/);
  });
});
