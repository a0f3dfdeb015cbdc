import fc from 'fast-check';
import { jsonBodyRefusal, MAX_JSON_DEPTH } from './validation';

function nested(depth: number, leaf: unknown = 1): unknown {
  let value: unknown = leaf;
  for (let level = 1; level < depth; level++) value = level % 2 ? [value] : { a: value };
  return value;
}

describe('jsonBodyRefusal', () => {
  it('accepts JSON up to the depth limit without NUL', () => {
    expect(jsonBodyRefusal(nested(MAX_JSON_DEPTH, { deepest: 'text' }))).toBeUndefined();
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 20 }), (value) => {
        fc.pre(!JSON.stringify(value).includes('\\u0000'));
        expect(jsonBodyRefusal(value)).toBeUndefined();
      }),
      { numRuns: 500 },
    );
  });

  it('refuses one level more, and a hostile depth, without recursing', () => {
    expect(jsonBodyRefusal(nested(MAX_JSON_DEPTH + 1, {}))).toEqual({ field: 'body', message: `must not nest deeper than ${MAX_JSON_DEPTH} levels` });
    const hostile = JSON.parse(`${'['.repeat(200_000)}${']'.repeat(200_000)}`);
    expect(jsonBodyRefusal(hostile)).toMatchObject({ field: 'body' });
  });

  it('refuses a NUL anywhere in a string or a key', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 6 }), fc.string(), fc.string(), fc.boolean(), (value, before, after, inKey) => {
        const text = `${before}\u0000${after}`;
        const body = inKey ? { wrapper: [value, { [text]: 1 }] } : { wrapper: [value, text] };
        expect(jsonBodyRefusal(body)).toEqual({ field: 'body', message: 'text must not contain the NUL character (U+0000)' });
      }),
      { numRuns: 500 },
    );
  });
});
