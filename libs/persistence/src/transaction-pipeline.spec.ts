import fc from 'fast-check';
import { DatabaseError, escapeLiteral } from 'pg';
import { endsSession, inlineParameters, quoteLiteral } from './transaction-pipeline';

// node-postgres's own conversion of a parameter to the text it sends: the oracle for arrays.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { prepareValue } = require('pg/lib/utils') as { prepareValue(value: unknown): unknown };

describe('quoteLiteral', () => {
  it("writes exactly what node-postgres's escapeLiteral writes", () => {
    for (const text of ['', 'plain', "it's", 'back\\slash', "both ' and \\", "''", '\\\\', 'é€𝄞']) expect(quoteLiteral(text)).toBe(escapeLiteral(text));
    fc.assert(
      fc.property(fc.string({ unit: fc.constantFrom('a', "'", '\\', '"', ' ', 'é', '\n') }), (text) => {
        expect(quoteLiteral(text)).toBe(escapeLiteral(text));
      }),
    );
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), (text) => {
        expect(quoteLiteral(text)).toBe(escapeLiteral(text));
      }),
    );
  });
});

describe('inlineParameters', () => {
  it('cuts a statement once and fills it anew for every call', () => {
    const statement = 'UPDATE t SET a = $2, b = $1 WHERE "$3" = $3 AND c = $2';
    expect(inlineParameters(statement, ['x', 1, true])).toBe(`UPDATE t SET a = '1', b = 'x' WHERE "$3" = 'true' AND c = '1'`);
    expect(inlineParameters(statement, ["y'", null, false])).toBe(`UPDATE t SET a = NULL, b = 'y''' WHERE "$3" = 'false' AND c = NULL`);
    expect(inlineParameters(statement, ['x', Buffer.from('b'), true])).toBeUndefined();
    expect(inlineParameters(statement, ['x', 1])).toBeUndefined();
    expect(inlineParameters(`SELECT '$1'`, ['x'])).toBeUndefined();
    expect(inlineParameters(`SELECT '$1'`, ['x'])).toBeUndefined();
  });

  it('inlines text, numbers, booleans, dates and null as untyped literals, $10 apart from $1', () => {
    const parameters = ['a', 2, true, new Date('2026-11-26T09:00:00.000Z'), null, undefined, "it's", 'back\\slash', -1.5, false];
    expect(inlineParameters('INSERT INTO t VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)', parameters)).toBe(
      `INSERT INTO t VALUES ('a', '2', 'true', '2026-11-26T09:00:00.000Z', NULL, NULL, 'it''s',  E'back\\\\slash', '-1.5', 'false')`,
    );
    expect(inlineParameters('SELECT 1;', [])).toBe('SELECT 1');
  });

  it('refuses what it cannot inline safely: other kinds of value, NUL, a missing parameter', () => {
    for (const value of [
      Buffer.from('x'),
      { a: 1 },
      Number.NaN,
      Infinity,
      new Date(Number.NaN),
      'nul\u0000',
      10n,
      [Buffer.from('x')],
      [{ a: 1 }],
      [10n],
      [Number.NaN],
      ['nul\u0000'],
      [[new Date()]],
    ]) {
      expect(inlineParameters('SELECT $1', [value])).toBeUndefined();
    }
    expect(inlineParameters('SELECT $2', ['only one'])).toBeUndefined();
  });

  it('inlines arrays of text, numbers, booleans and null in the text form node-postgres sends them in', () => {
    expect(
      inlineParameters('SELECT $1::bigint[], $2::text[]', [
        [1, -2, '3'],
        ['a"b', 'c\\d', null, 'e,{f}'],
      ]),
    ).toBe(`SELECT '{"1","-2","3"}'::bigint[],  E'{"a\\\\"b","c\\\\\\\\d",NULL,"e,{f}"}'::text[]`);
    const element = fc.oneof(
      fc.string({ unit: 'grapheme', maxLength: 12 }).filter((text) => !text.includes('\u0000')),
      fc.integer(),
      fc.double({ noNaN: true, noDefaultInfinity: true }),
      fc.boolean(),
      fc.constant(null),
    );
    fc.assert(
      fc.property(fc.array(fc.oneof(element, fc.array(element, { maxLength: 3 })), { maxLength: 8 }), (array) => {
        expect(inlineParameters('SELECT $1', [array])).toBe(`SELECT ${escapeLiteral(prepareValue(array) as string)}`);
      }),
    );
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
    // `$0` is no parameter; `a$1` is one name to PostgreSQL.
    expect(inlineParameters('SELECT $0', ['x'])).toBeUndefined();
    expect(inlineParameters('SELECT a$1 FROM t WHERE id = $1', ['x'])).toBeUndefined();
  });
});

describe('endsSession', () => {
  const answer = (severity: string, code: string): DatabaseError => Object.assign(new DatabaseError('x', 0, 'error'), { severity, code });

  it('tells an answer that ended the session from one that left it usable', () => {
    expect(endsSession(answer('FATAL', '57P01'))).toBe(true); // pg_terminate_backend
    expect(endsSession(answer('PANIC', 'XX000'))).toBe(true);
    expect(endsSession(answer('ERROR', '23505'))).toBe(false);
    expect(endsSession(answer('ERROR', '57014'))).toBe(false); // a cancelled statement
  });
});
