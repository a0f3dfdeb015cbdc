import fc from 'fast-check';
import { escapeLiteral } from 'pg';
import { redactQuery, redactQueryString, redactSqlLiterals } from './redaction';

describe('redactQuery', () => {
  it('keeps the path and the parameter names, never a value', () => {
    expect(redactQuery('/api/brain/query?q=merger%20plans&k=5')).toBe('/api/brain/query?q=REDACTED&k=REDACTED');
    expect(redactQuery('/api/missions?cursor=eyJhdCI6IjIwMjYifQ&limit=20')).toBe('/api/missions?cursor=REDACTED&limit=REDACTED');
    expect(redactQuery('/api/missions')).toBe('/api/missions');
    expect(redactQuery('/api/missions?')).toBe('/api/missions?');
  });

  it('redacts a pair whose name is not a plain name, and a bare value', () => {
    expect(redactQueryString('secret%20text')).toBe('REDACTED');
    expect(redactQueryString('plain&=x&a=b=c')).toBe('plain=REDACTED&REDACTED&a=REDACTED');
  });

  it('never lets a value through, whatever the query holds', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.tuple(
            fc.stringMatching(/^[a-z]{1,8}$/),
            fc.string({ minLength: 12, maxLength: 40 }).filter((value) => !value.includes('REDACTED')),
          ),
          { minLength: 1, maxLength: 6 },
        ),
        (pairs) => {
          const query = new URLSearchParams(pairs).toString();
          const redacted = redactQuery(`/api/brain/query?${query}`);
          for (const [, value] of pairs) {
            const encoded = new URLSearchParams({ v: value }).toString().slice(2);
            expect(redacted).not.toContain(encoded);
          }
        },
      ),
    );
  });
});

describe('redactSqlLiterals', () => {
  it('replaces every string literal, escaped quotes and prefixed forms included, and keeps the statement', () => {
    expect(redactSqlLiterals(`START TRANSACTION;\nSELECT set_config('app.tenant_id', 'acme', true);\nUPDATE m SET s = 'it''s' WHERE id = E'x\\'y'`)).toBe(
      `START TRANSACTION;\nSELECT set_config('REDACTED', 'REDACTED', true);\nUPDATE m SET s = 'REDACTED' WHERE id = 'REDACTED'`,
    );
    expect(redactSqlLiterals('SELECT "tenantId" FROM m WHERE id = $1')).toBe('SELECT "tenantId" FROM m WHERE id = $1');
  });

  it('never lets a literal through, whatever it holds', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.string({ minLength: 6, maxLength: 30 }).filter((value) => !value.includes('REDACTED') && /[A-Za-z0-9]{6}/.test(value)),
          { minLength: 1, maxLength: 5 },
        ),
        (values) => {
          // As the driver escapes a value inlined into a statement (backslashes make it an E'' string).
          const sql = values.map((value, index) => `SELECT set_config('k${index}', ${escapeLiteral(value)}, true)`).join(';\n');
          const redacted = redactSqlLiterals(sql);
          for (const value of values) for (const run of value.match(/[A-Za-z0-9]{6,}/g) ?? []) expect(redacted).not.toContain(run);
        },
      ),
    );
  });
});
