import fc from 'fast-check';
import { analyze, eachTermCount, MAX_PROBES, MAX_TOKEN_LENGTH, normalizeText, termCounts, termFrequencies, TokenDictionary } from './analyzer';
import { ENGLISH_STOPWORDS } from './stopwords';

describe('analyze', () => {
  it('lower-cases, drops stop words and punctuation, and stems English words with Porter', () => {
    expect(analyze('Measurement of the Dielectric Constant of Liquids by the use of Microwave Techniques')).toEqual([
      'measur',
      'dielectr',
      'constant',
      'liquid',
      'us',
      'microwav',
      'techniqu',
    ]);
  });

  it('gives a query and a document the same terms for inflections of one word', () => {
    expect(analyze('connected connecting connection connections')).toEqual(['connect', 'connect', 'connect', 'connect']);
    expect(analyze('GENERALIZATIONS')).toEqual(analyze('generalization'));
  });

  it('applies Unicode compatibility normalisation before anything else', () => {
    // Full-width letters, the "fi" ligature and a superscript two become their plain forms.
    expect(normalizeText('ＴＲＡＮＳＩＳＴＯＲ ﬁlter x²')).toBe('transistor filter x2');
    expect(analyze('ＴＲＡＮＳＩＳＴＯＲＳ')).toEqual(analyze('transistors'));
  });

  it('treats contractions as the stop words they are but keeps the words they resemble', () => {
    expect(analyze("she'll don't won't")).toEqual([]);
    expect(analyze('shell well shed')).toEqual(['shell', 'well', 'shed']);
  });

  it('drops the possessive and inner apostrophes, whatever apostrophe character is used', () => {
    expect(analyze("Maxwell's equations")).toEqual(['maxwel', 'equat']);
    expect(analyze('Maxwell’s O’Neill')).toEqual(['maxwel', 'oneil']);
  });

  it('keeps numbers and non-English words unstemmed', () => {
    expect(analyze('the 1950s and 3.5 GHz')).toEqual(['1950s', '3', '5', 'ghz']);
    expect(analyze('Größe résumé Москва')).toEqual(['größe', 'résumé', 'москва']);
  });

  it('splits Han, Hiragana and Katakana into one term per character', () => {
    expect(analyze('東京タワー tokyo')).toEqual(['東', '京', 'タ', 'ワ', 'ー', 'tokyo']);
  });

  it('skips tokens longer than the limit', () => {
    expect(analyze(`${'a'.repeat(MAX_TOKEN_LENGTH + 1)} ok`)).toEqual(['ok']);
    expect(analyze('b'.repeat(MAX_TOKEN_LENGTH))).toEqual(['b'.repeat(MAX_TOKEN_LENGTH)]);
  });

  it('returns no terms for stop words, operators and punctuation alone', () => {
    expect(analyze('the of and OR AND NOT')).toEqual([]);
    expect(analyze('!!! ((*)) && || -- "" \' ; DROP')).toEqual(['drop']);
    expect(analyze('')).toEqual([]);
  });

  it('takes another stop-word list in place of the English one when given', () => {
    const list = new Set(['use', "don't", 'describe']);
    expect(analyze('the use of filters described', list)).toEqual(['the', 'of', 'filter', 'describ']);
    expect(analyze("don't dont", list)).toEqual(['dont']);
    expect(analyze('the use of filters')).toEqual(['us', 'filter']);
  });

  it('gives the same terms for tokens seen before (its token cache) and keeps that cache out of other stop-word lists', () => {
    const text = "The engineer's filters don't filter the O'Neill amplifiers; 東京 amplifiers filtered.";
    const first = analyze(text);
    expect(first).toEqual(['engin', 'filter', 'filter', 'oneil', 'amplifi', '東', '京', 'amplifi', 'filter']);
    expect(analyze(text)).toEqual(first);
    expect(analyze(text, new Set())).toEqual(['the', 'engin', 'filter', 'dont', 'filter', 'the', 'oneil', 'amplifi', '東', '京', 'amplifi', 'filter']);
    expect(analyze(text)).toEqual(first);
  });

  it('never throws on arbitrary Unicode, lone surrogates and control characters', () => {
    const hostile = ['\ud800\udfff\ud800', '\u0000\u0001\u202e', '🧪🔬 emoji', 'a\u0301'.repeat(1000), '\uFFFF\uFFFE'];
    for (const text of hostile) expect(() => analyze(text)).not.toThrow();
    expect(analyze('🧪🔬 emoji')).toEqual(['emoji']);
  });
});

/** The English list, but not the same set: analyze then matches every token with WORD and looks nothing up. */
const ENGLISH_UNCACHED = new Set(ENGLISH_STOPWORDS);

/** Text that goes through every path of the scanner: ASCII runs, apostrophes, letters and marks above U+007F, unspaced scripts, long runs. */
const pieces = fc.constantFrom(
  'amplifier',
  'Amplifiers',
  'the',
  "don't",
  "o'neill",
  "maxwell's",
  "'quoted'",
  "it''s",
  "x'",
  "'y",
  '1950s',
  '3.5',
  'GHz',
  'café',
  'cafe\u0301',
  'Größe',
  'naïve',
  'москва',
  '東京タワー',
  'tokyo東京',
  'ﬁlter',
  'ＴＲＡＮＳ',
  '\u2019s',
  'O\u2019Neill',
  '—',
  '–',
  '“',
  '”',
  '…',
  ' ',
  '  ',
  '\n\n',
  '\t',
  '.',
  ',',
  ';',
  '-',
  '_',
  '𠮷野家',
  '𐐀𐐨',
  '𝐀𝐛𝐜',
  'x😀y',
  'a'.repeat(MAX_TOKEN_LENGTH + 1),
  'b'.repeat(MAX_TOKEN_LENGTH + 2),
  'c'.repeat(MAX_TOKEN_LENGTH + 3),
  '\u0301',
  '🧪',
  '\ud800',
  '\u0000',
  'İ',
  'ǅ',
  '²',
);
const texts = fc.oneof(
  fc.array(pieces, { maxLength: 40 }).map((parts) => parts.join('')),
  fc.string({ unit: 'grapheme', maxLength: 60 }),
  fc.string({ unit: 'binary', maxLength: 60 }),
  fc.string({ maxLength: 60 }),
);

describe('the token dictionary (analyze with the English stop words, termCounts)', () => {
  it('gives exactly the terms of matching every token with WORD, for any text', () => {
    fc.assert(
      fc.property(texts, (text) => {
        expect(analyze(text)).toEqual(analyze(text, ENGLISH_UNCACHED));
      }),
      { numRuns: 3_000 },
    );
  });

  it('counts what analyze gives, over several texts together, in the order the terms first occur', () => {
    fc.assert(
      fc.property(fc.array(texts, { maxLength: 3 }), (parts) => {
        expect([...termCounts(...parts)]).toEqual([...termFrequencies(parts.flatMap((part) => analyze(part, ENGLISH_UNCACHED)))]);
      }),
      { numRuns: 1_000 },
    );
  });

  it('numbers each term once within a generation, and gives the counts termCounts gives', () => {
    fc.assert(
      fc.property(fc.array(texts, { maxLength: 3 }), (parts) => {
        const visited: Array<[string, number]> = [];
        const numbers = new Map<string, number>();
        const generations = new Set<number>();
        eachTermCount(parts, (term, count, number, generation) => {
          visited.push([term, count]);
          expect(numbers.get(term) ?? number).toBe(number);
          numbers.set(term, number);
          generations.add(generation);
        });
        expect(visited).toEqual([...termCounts(...parts)]);
        expect(new Set(numbers.values()).size).toBe(numbers.size);
        expect(generations.size).toBeLessThanOrEqual(1);
      }),
      { numRuns: 500 },
    );
    // The same term keeps its number from call to call while the dictionary is not renewed.
    const numberOf = (text: string): number[] => {
      const found: number[] = [];
      eachTermCount([text], (_term, _count, number) => found.push(number));
      return found;
    };
    expect(numberOf('klystron magnetron')).toEqual(numberOf('magnetron klystrons').reverse());
  });

  it('starts again empty once full, and gives the same terms afterwards', () => {
    const text = "Klystron amplifiers don't oscillate; O'Neill's café filters";
    const before = analyze(text);
    const generationOf = (): number => {
      let found = Number.NaN;
      eachTermCount([text], (_term, _count, _number, generation) => (found = generation));
      return found;
    };
    const firstGeneration = generationOf();
    // More distinct tokens than the dictionary keeps (200,000), in one text and in many.
    const distinct = Array.from({ length: 210_000 }, (_, n) => `w${n.toString(36)}x`);
    expect(analyze(distinct.join(' ')).length).toBe(distinct.length);
    for (let start = 0; start < distinct.length; start += 10_000) termCounts(distinct.slice(start, start + 10_000).join(' '), text);
    expect(analyze(text)).toEqual(before);
    expect([...termCounts(text, 'klystron')]).toEqual([...termFrequencies([...before, 'klystron'])]);
    // Numbers were given anew meanwhile: their generation changed.
    expect(generationOf()).not.toBe(firstGeneration);
  });
});

describe('TokenDictionary', () => {
  it('tells tokens of one hash apart by their characters', () => {
    const dictionary = new TokenDictionary();
    const first = dictionary.add('amplifier', 7, 'amplifi');
    const second = dictionary.add('amplifies', 7, 'amplifies');
    const text = 'the amplifies and the amplifier';
    expect(dictionary.find(text, 4, 13, 7)).toBe(second);
    expect(dictionary.find(text, 22, 31, 7)).toBe(first);
    expect(dictionary.term(dictionary.termOf(second))).toBe('amplifies');
    expect(dictionary.find('amplified', 0, 9, 7)).toBe(-1);
  });

  it('keeps no token further than MAX_PROBES slots from its own, so a lookup visits no more', () => {
    const dictionary = new TokenDictionary();
    const entries = Array.from({ length: MAX_PROBES + 8 }, (_, n) => dictionary.add(`t${n}`, 99, `t${n}`));
    expect(entries.slice(0, MAX_PROBES).every((entry) => entry >= 0)).toBe(true);
    expect(entries.slice(MAX_PROBES)).toEqual(Array.from({ length: 8 }, () => -1));
    expect(dictionary.size).toBe(MAX_PROBES);
    for (let n = 0; n < MAX_PROBES + 8; n++) expect(dictionary.find(`t${n}`, 0, `t${n}`.length, 99)).toBe(entries[n]);
    // Another hash still finds its own slot.
    expect(dictionary.add('other', 12345, 'other')).toBeGreaterThanOrEqual(0);
  });

  it('finds every token it kept after its table has grown, with its own term, and tokens it never kept not at all', () => {
    const dictionary = new TokenDictionary();
    // Past a quarter of a million slots' worth of growth, with hashes that collide in their low bits.
    const tokens = Array.from({ length: 70_000 }, (_, n) => `tok${n.toString(36)}`);
    const hashOf = (n: number): number => Math.imul(n, 0x9e3779b1) ^ (n % 7);
    const kept = tokens.map((token, n) => dictionary.add(token, hashOf(n), n % 5 === 0 ? null : `term-${n}`) !== -1);
    expect(kept.filter(Boolean).length).toBeGreaterThan(69_000);
    expect(dictionary.size).toBe(kept.filter(Boolean).length);
    for (const [n, token] of tokens.entries()) {
      const text = `  ${token}, `;
      const handle = dictionary.find(text, 2, 2 + token.length, hashOf(n));
      if (!kept[n]) {
        expect(handle).toBe(-1);
        continue;
      }
      expect(handle).toBeGreaterThanOrEqual(0);
      const term = dictionary.termOf(handle);
      if (n % 5 === 0) expect(term).toBe(-1);
      else expect(dictionary.term(term)).toBe(`term-${n}`);
      // The same hash with other characters, or fewer of them, is another token.
      expect(dictionary.find(`${token}x`, 0, token.length + 1, hashOf(n))).toBe(-1);
      expect(dictionary.find(token, 0, token.length - 1, hashOf(n))).toBe(-1);
    }
  });

  it('starts again empty once it holds its limit, and not before', () => {
    const dictionary = new TokenDictionary(3);
    dictionary.add('a', 1, 'a');
    dictionary.add('b', 2, 'b');
    dictionary.startAnalysis();
    expect(dictionary.size).toBe(2);
    dictionary.add('c', 3, 'c');
    dictionary.startAnalysis();
    expect(dictionary.size).toBe(0);
    expect(dictionary.find('a', 0, 1, 1)).toBe(-1);
    const again = dictionary.add('a', 1, 'a');
    expect(dictionary.term(dictionary.termOf(again))).toBe('a');
  });
});

describe('termFrequencies', () => {
  it('counts repeated terms', () => {
    expect([...termFrequencies(['a', 'b', 'a'])]).toEqual([
      ['a', 2],
      ['b', 1],
    ]);
  });
});
