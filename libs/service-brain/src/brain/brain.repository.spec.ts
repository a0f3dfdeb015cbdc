import { integerArrayLiteral } from './brain.repository';

describe('integerArrayLiteral', () => {
  it('writes whole numbers as a PostgreSQL array literal, signed 64-bit hashes included', () => {
    expect(integerArrayLiteral([])).toBe('{}');
    expect(integerArrayLiteral([1, 0, -7])).toBe('{1,0,-7}');
    expect(integerArrayLiteral(['-9223372036854775808', '9223372036854775807', '42'])).toBe('{-9223372036854775808,9223372036854775807,42}');
  });

  it('refuses anything that is not a whole number rather than send it', () => {
    for (const bad of ['1,2', '"1"', '1}', '', ' 1', '1.5', 'NULL', '{1}', '1e3']) expect(() => integerArrayLiteral([bad])).toThrow(TypeError);
    for (const bad of [1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 60]) expect(() => integerArrayLiteral([bad])).toThrow(TypeError);
  });
});
