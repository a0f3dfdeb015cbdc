/**
 * Term hashes as the service handles them in bulk: each signed 64-bit hash as two 32-bit halves,
 * the high one signed and the low one as its bit pattern, side by side in an Int32Array
 * (`[high₀, low₀, high₁, low₁, …]`); and PostgreSQL's binary form of one-dimensional arrays
 * (what `array_send` writes and `array_recv` reads), so that a chunk's terms reach the database
 * and come back without ever being written as decimal text. A `bigint[]` parameter sent as text
 * cost the service a decimal string per term and a check of it, and PostgreSQL a parse of each;
 * node-postgres sends a Buffer parameter in binary, which PostgreSQL reads as the `$n::bigint[]`
 * or `$n::int[]` the statement casts it to.
 */

const INT8_OID = 20;
const INT4_OID = 23;
/** ndim, flags (has nulls), element type; then per dimension its length and lower bound. */
const HEADER_BYTES = 12;
const DIMENSION_BYTES = 8;

function view(buffer: Buffer): DataView {
  return new DataView(buffer.buffer, buffer.byteOffset, buffer.byteLength);
}

function arrayHeader(count: number, oid: number, elementBytes: number): { buffer: Buffer; data: DataView; at: number } {
  if (count === 0) {
    const buffer = Buffer.alloc(HEADER_BYTES);
    const data = view(buffer);
    data.setInt32(8, oid);
    return { buffer, data, at: HEADER_BYTES };
  }
  const buffer = Buffer.allocUnsafe(HEADER_BYTES + DIMENSION_BYTES + count * (4 + elementBytes));
  const data = view(buffer);
  data.setInt32(0, 1);
  data.setInt32(4, 0);
  data.setInt32(8, oid);
  data.setInt32(12, count);
  data.setInt32(16, 1);
  return { buffer, data, at: HEADER_BYTES + DIMENSION_BYTES };
}

/** The hashes (pairs of halves, `pairs.length / 2` of them) as a binary `bigint[]`. */
export function binaryBigintArray(pairs: Int32Array): Buffer {
  if (pairs.length % 2 !== 0) throw new RangeError('Term hashes come in pairs of halves');
  const count = pairs.length / 2;
  const { buffer, data, at } = arrayHeader(count, INT8_OID, 8);
  for (let index = 0, offset = at; index < count; index++, offset += 12) {
    data.setInt32(offset, 8);
    data.setInt32(offset + 4, pairs[2 * index] as number);
    data.setInt32(offset + 8, pairs[2 * index + 1] as number);
  }
  return buffer;
}

/** Safe whole numbers (chunk sequence numbers, say) as a binary `bigint[]`; refuses anything else rather than send it. */
export function binaryBigintValues(values: ArrayLike<number>): Buffer {
  const { buffer, data, at } = arrayHeader(values.length, INT8_OID, 8);
  for (let index = 0, offset = at; index < values.length; index++, offset += 12) {
    const value = values[index] as number;
    if (!Number.isSafeInteger(value)) throw new TypeError(`Not a safe whole number: ${String(value).slice(0, 32)}`);
    const high = Math.floor(value / 2 ** 32);
    data.setInt32(offset, 8);
    data.setInt32(offset + 4, high);
    data.setUint32(offset + 8, value - high * 2 ** 32);
  }
  return buffer;
}

/** Whole numbers of 32 bits as a binary `int[]`; refuses anything else rather than send it. */
export function binaryIntArray(values: ArrayLike<number>): Buffer {
  const { buffer, data, at } = arrayHeader(values.length, INT4_OID, 4);
  for (let index = 0, offset = at; index < values.length; index++, offset += 8) {
    const value = values[index] as number;
    if ((value | 0) !== value) throw new TypeError(`Not a 32-bit whole number: ${String(value).slice(0, 32)}`);
    data.setInt32(offset, 4);
    data.setInt32(offset + 4, value);
  }
  return buffer;
}

/** The elements of a binary one-dimensional array without nulls of `oid`, each `elementBytes` long: where they start, and how many. */
function binaryElements(buffer: Buffer, oid: number, elementBytes: number, what: string): { data: DataView; at: number; count: number } {
  const data = view(buffer);
  if (buffer.length < HEADER_BYTES) throw new RangeError(`Not a binary ${what}: ${buffer.length} bytes`);
  const dimensions = data.getInt32(0);
  if (data.getInt32(8) !== oid) throw new RangeError(`Not a binary ${what}: element type ${data.getInt32(8)}`);
  if (data.getInt32(4) !== 0) throw new RangeError(`A binary ${what} holds nulls`);
  if (dimensions === 0) {
    if (buffer.length !== HEADER_BYTES) throw new RangeError(`Not a binary ${what}: bytes after an empty array`);
    return { data, at: HEADER_BYTES, count: 0 };
  }
  if (dimensions !== 1) throw new RangeError(`Not a binary ${what}: ${dimensions} dimensions`);
  if (buffer.length < HEADER_BYTES + DIMENSION_BYTES) throw new RangeError(`Not a binary ${what}: cut short`);
  const count = data.getInt32(12);
  const at = HEADER_BYTES + DIMENSION_BYTES;
  if (count < 0 || buffer.length !== at + count * (4 + elementBytes)) throw new RangeError(`Not a binary ${what}: ${count} elements in ${buffer.length} bytes`);
  for (let index = 0, offset = at; index < count; index++, offset += 4 + elementBytes) {
    if (data.getInt32(offset) !== elementBytes) throw new RangeError(`Not a binary ${what}: an element of ${data.getInt32(offset)} bytes`);
  }
  return { data, at, count };
}

/** A binary `bigint[]` (array_send's) as pairs of halves. */
export function readBinaryBigintArray(buffer: Buffer): Int32Array {
  const { data, at, count } = binaryElements(buffer, INT8_OID, 8, 'bigint[]');
  const pairs = new Int32Array(2 * count);
  for (let index = 0, offset = at + 4; index < count; index++, offset += 12) {
    pairs[2 * index] = data.getInt32(offset);
    pairs[2 * index + 1] = data.getInt32(offset + 4);
  }
  return pairs;
}

/** A binary `int[]` (array_send's). */
export function readBinaryIntArray(buffer: Buffer): Int32Array {
  const { data, at, count } = binaryElements(buffer, INT4_OID, 4, 'int[]');
  const values = new Int32Array(count);
  for (let index = 0, offset = at + 4; index < count; index++, offset += 8) values[index] = data.getInt32(offset);
  return values;
}

/** The hash of halves `high`, `low` as PostgreSQL writes the bigint (decimal, signed). */
export function hashText(high: number, low: number): string {
  return ((BigInt(high | 0) << 32n) | BigInt(low >>> 0)).toString();
}

/** The decimal text of each hash of `pairs`. */
export function hashTexts(pairs: Int32Array): string[] {
  const texts: string[] = [];
  for (let index = 0; index < pairs.length; index += 2) texts.push(hashText(pairs[index] as number, pairs[index + 1] as number));
  return texts;
}

/** The halves of a signed 64-bit hash given as decimal text (PostgreSQL's bigint), as a pair. */
export function hashPair(text: string): [number, number] {
  if (!/^-?\d{1,19}$/.test(text)) throw new RangeError(`Not a bigint: ${text.slice(0, 32)}`);
  const value = BigInt(text);
  if (BigInt.asIntN(64, value) !== value) throw new RangeError(`Not a bigint: ${text.slice(0, 32)}`);
  return [Number(BigInt.asIntN(32, value >> 32n)), Number(BigInt.asIntN(32, value))];
}
