import fc from 'fast-check';
import { binaryBigintArray, binaryBigintValues, binaryIntArray, hashPair, hashText, hashTexts, readBinaryBigintArray, readBinaryIntArray } from './term-hashes';

const bigint64 = fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n });

describe('term hashes as halves', () => {
  it('split any signed 64-bit value into halves and write it back as PostgreSQL writes the bigint', () => {
    fc.assert(
      fc.property(bigint64, (value) => {
        const [high, low] = hashPair(value.toString());
        expect(high).toBe(Number(BigInt.asIntN(32, value >> 32n)));
        expect(low).toBe(Number(BigInt.asIntN(32, value)));
        expect(hashText(high, low)).toBe(value.toString());
      }),
      { numRuns: 1_000 },
    );
    for (const edge of ['0', '-1', '4294967295', '4294967296', '-4294967296', '9223372036854775807', '-9223372036854775808']) expect(hashText(...hashPair(edge))).toBe(edge);
    expect(hashTexts(Int32Array.from([0, -1, -1, -1, -2147483648, 0]))).toEqual(['4294967295', '-1', '-9223372036854775808']);
  });

  it('refuses decimal text that is not a bigint', () => {
    for (const bad of ['', '1.5', '+1', ' 1', '9223372036854775808', '-9223372036854775809', '0x10', '1e3']) expect(() => hashPair(bad)).toThrow(RangeError);
  });
});

describe('PostgreSQL binary arrays', () => {
  it('write bigint[] and int[] as array_send does, and read them back', () => {
    // array_send('{1,-2}'::bigint[]) and array_send('{7}'::int[]), as PostgreSQL 15 gives them.
    expect(binaryBigintArray(Int32Array.from([0, 1, -1, -2])).toString('hex')).toBe(
      '00000001' + '00000000' + '00000014' + '00000002' + '00000001' + '00000008' + '0000000000000001' + '00000008' + 'fffffffffffffffe',
    );
    expect(binaryIntArray([7]).toString('hex')).toBe('00000001' + '00000000' + '00000017' + '00000001' + '00000001' + '00000004' + '00000007');
    // An empty array has no dimension.
    expect(binaryBigintArray(new Int32Array(0)).toString('hex')).toBe('00000000' + '00000000' + '00000014');
    expect(binaryIntArray([]).toString('hex')).toBe('00000000' + '00000000' + '00000017');
    fc.assert(
      fc.property(fc.array(fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }), { maxLength: 60 }), (values) => {
        const ints = Int32Array.from(values);
        expect([...readBinaryIntArray(binaryIntArray(ints))]).toEqual(values);
        const pairs = Int32Array.from(values.length % 2 === 0 ? values : values.slice(1));
        expect([...readBinaryBigintArray(binaryBigintArray(pairs))]).toEqual([...pairs]);
      }),
    );
  });

  it('write safe whole numbers as the bigint[] array_send gives, each as its 64 bits', () => {
    expect(binaryBigintValues([1, 4_294_967_296, Number.MAX_SAFE_INTEGER]).toString('hex')).toBe(
      '00000001' + '00000000' + '00000014' + '00000003' + '00000001' + '00000008' + '0000000000000001' + '00000008' + '0000000100000000' + '00000008' + '001fffffffffffff',
    );
    fc.assert(
      fc.property(fc.array(fc.maxSafeInteger(), { maxLength: 40 }), (values) => {
        const pairs = readBinaryBigintArray(binaryBigintValues(values));
        expect(hashTexts(pairs)).toEqual(values.map(String));
      }),
    );
    for (const bad of [1.5, 2 ** 53, Number.NaN]) expect(() => binaryBigintValues([1, bad])).toThrow(TypeError);
  });

  it('refuse to write what the column cannot hold, or an odd number of halves', () => {
    for (const bad of [1.5, 2 ** 31, -(2 ** 31) - 1, Number.NaN, Number.POSITIVE_INFINITY]) expect(() => binaryIntArray([1, bad])).toThrow(TypeError);
    expect(() => binaryBigintArray(Int32Array.from([1, 2, 3]))).toThrow(RangeError);
  });

  it('refuse to read what is not a one-dimensional array without nulls of the type asked for', () => {
    const ints = binaryIntArray([1, 2]);
    expect(() => readBinaryBigintArray(ints)).toThrow(/element type 23/);
    expect(() => readBinaryIntArray(binaryBigintArray(Int32Array.from([0, 1])))).toThrow(/element type 20/);
    expect(() => readBinaryIntArray(ints.subarray(0, ints.length - 1))).toThrow(/2 elements/);
    expect(() => readBinaryIntArray(Buffer.concat([ints, Buffer.alloc(1)]))).toThrow(/2 elements/);
    expect(() => readBinaryIntArray(ints.subarray(0, 8))).toThrow(/8 bytes/);
    expect(() => readBinaryIntArray(Buffer.concat([binaryIntArray([]), Buffer.alloc(4)]))).toThrow(/after an empty array/);
    const withNulls = Buffer.from(ints);
    withNulls.writeInt32BE(1, 4);
    expect(() => readBinaryIntArray(withNulls)).toThrow(/nulls/);
    const twoDimensions = Buffer.from(ints);
    twoDimensions.writeInt32BE(2, 0);
    expect(() => readBinaryIntArray(twoDimensions)).toThrow(/2 dimensions/);
    const wideElement = Buffer.from(ints);
    wideElement.writeInt32BE(8, 20);
    expect(() => readBinaryIntArray(wideElement)).toThrow(/element of 8 bytes/);
    const nullElement = Buffer.from(ints);
    nullElement.writeInt32BE(-1, 28);
    expect(() => readBinaryIntArray(nullElement)).toThrow(/element of -1 bytes/);
  });
});
