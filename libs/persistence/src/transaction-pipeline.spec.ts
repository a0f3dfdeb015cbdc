import { inlineParameters } from './transaction-pipeline';

describe('inlineParameters', () => {
  it('inlines text, numbers, booleans, dates and null as untyped literals, $10 apart from $1', () => {
    const parameters = ['a', 2, true, new Date('2026-11-26T09:00:00.000Z'), null, undefined, "it's", 'back\\slash', -1.5, false];
    expect(inlineParameters('INSERT INTO t VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)', parameters)).toBe(
      `INSERT INTO t VALUES ('a', '2', 'true', '2026-11-26T09:00:00.000Z', NULL, NULL, 'it''s',  E'back\\\\slash', '-1.5', 'false')`,
    );
    expect(inlineParameters('SELECT 1;', [])).toBe('SELECT 1');
  });

  it('refuses what it cannot inline safely: other kinds of value, NUL, a missing parameter', () => {
    for (const value of [[1, 2], Buffer.from('x'), { a: 1 }, Number.NaN, Infinity, new Date(Number.NaN), 'nul\u0000', 10n]) {
      expect(inlineParameters('SELECT $1', [value])).toBeUndefined();
    }
    expect(inlineParameters('SELECT $2', ['only one'])).toBeUndefined();
  });

  it('refuses statements where a $n could be text: quotes, dollar quotes, several statements', () => {
    expect(inlineParameters(`SELECT '$1'`, ['x'])).toBeUndefined();
    expect(inlineParameters('SELECT $$ $1 $$', ['x'])).toBeUndefined();
    expect(inlineParameters('SELECT $tag$ $1 $tag$', ['x'])).toBeUndefined();
    expect(inlineParameters('SELECT $1; DROP TABLE t', ['x'])).toBeUndefined();
  });
});
