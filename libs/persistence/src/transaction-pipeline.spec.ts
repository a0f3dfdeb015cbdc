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

  it('leaves quoted identifiers as they are, and refuses comments, where a literal could escape into a statement of its own', () => {
    expect(inlineParameters('SELECT id AS "$1", "we""ird$2" FROM t WHERE a = $1 AND b = $2', ['x', 'y'])).toBe(`SELECT id AS "$1", "we""ird$2" FROM t WHERE a = 'x' AND b = 'y'`);
    expect(inlineParameters('SELECT 1 FROM t WHERE id = $1 -- by $2\n AND tenant_id = $3', ['a', 'x\n; DELETE FROM t; --', 'c'])).toBeUndefined();
    expect(inlineParameters('SELECT 1 /* $2 */ FROM t WHERE id = $1', ['a', 'b'])).toBeUndefined();
    expect(inlineParameters('SELECT "unterminated FROM t WHERE id = $1', ['a'])).toBeUndefined();
    expect(inlineParameters('SELECT a - $1 FROM t', [5])).toBe(`SELECT a - '5' FROM t`);
  });

  it('refuses statements where a $n could be text: quotes, dollar quotes, several statements', () => {
    expect(inlineParameters(`SELECT '$1'`, ['x'])).toBeUndefined();
    expect(inlineParameters('SELECT $$ $1 $$', ['x'])).toBeUndefined();
    expect(inlineParameters('SELECT $tag$ $1 $tag$', ['x'])).toBeUndefined();
    expect(inlineParameters('SELECT $1; DROP TABLE t', ['x'])).toBeUndefined();
  });
});
