import fc from 'fast-check';
import { redactQuery, redactQueryString } from './redaction';

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
      fc.property(fc.array(fc.tuple(fc.stringMatching(/^[a-z]{1,8}$/), fc.string({ minLength: 12, maxLength: 40 }).filter((value) => !value.includes('REDACTED'))), { minLength: 1, maxLength: 6 }), (pairs) => {
        const query = new URLSearchParams(pairs).toString();
        const redacted = redactQuery(`/api/brain/query?${query}`);
        for (const [, value] of pairs) {
          const encoded = new URLSearchParams({ v: value }).toString().slice(2);
          expect(redacted).not.toContain(encoded);
        }
      }),
    );
  });
});
