import { swapKafkajsModule } from './kafkajs-module-swap';

/**
 * kafkajs 2.2.4 encodes each record of a produce request with one `Encoder` for the record and one
 * more for every header, and each `Encoder` starts as a zero-filled 512-byte buffer; the headers'
 * buffers are then copied into the record's, and the record's grows (another zero-filled buffer and
 * a copy) once it passes 512 bytes. Every variable-length integer it writes (two per header, five
 * more per record) allocates an array and a Buffer of its own, and the record's timestamp delta is
 * sized and written through 64-bit `Long` objects. Our messages carry eight or nine headers (ids,
 * type, tenant, trace, reply-to, deadline, the sealed payload's key): a record cost ten zeroed
 * buffers and some thirty small allocations, and these varints alone were a tenth of what the
 * gateway allocated under the distributed read (a sampling heap profile), each allocation a step
 * towards the next garbage collection, which pauses every request in flight.
 *
 * The record below writes the same bytes into one buffer sized for the whole record, varints
 * included, and hands it to kafkajs as an `Encoder` holding those bytes. It replaces kafkajs's
 * record module before kafkajs first needs it (the module is loaded lazily by the produce request),
 * and only when that module is the one kafkajs 2.2.4 ships and a sample record comes out byte for
 * byte as kafkajs writes it; `record-encoder-fix.spec.ts` checks the bytes against kafkajs's.
 */

/** kafkajs's Encoder, the part this module uses (the package ships no declarations for it). */
export interface KafkaEncoder {
  readonly buffer: Buffer;
  writeVarLong(value: number): KafkaEncoder;
}

/** The two fields every kafkajs 2.2.4 `Encoder` holds its bytes in; its `buffer` is `buf` up to `offset`. */
interface EncoderFields {
  buf: Buffer;
  offset: number;
}

interface EncoderClass {
  new (initialSize?: number): KafkaEncoder;
  readonly prototype: KafkaEncoder;
}

export type HeaderValue = Buffer | string;

export interface RecordInput {
  readonly offsetDelta?: number;
  readonly timestampDelta?: number;
  readonly key?: Buffer | string | null;
  readonly value?: Buffer | string | null;
  readonly headers?: Readonly<Record<string, HeaderValue | HeaderValue[]>>;
}

export type RecordEncoder = (record: RecordInput) => KafkaEncoder;

/** Zig-zag of a 32-bit varint, as kafkajs computes it (values beyond 32 bits wrap there too). */
function zigZag32(value: number): number {
  return (value << 1) ^ (value >> 31);
}

/** Bytes of an unsigned 32-bit LEB128 (`zigZag32`'s result, read as unsigned). */
function sizeOfUVarInt32(encoded: number): number {
  let bytes = 1;
  while ((encoded & 0xffffff80) !== 0) {
    bytes += 1;
    encoded >>>= 7;
  }
  return bytes;
}

function writeUVarInt32(target: Buffer, offset: number, encoded: number): number {
  while ((encoded & 0xffffff80) !== 0) {
    target[offset++] = (encoded & 0x7f) | 0x80;
    encoded >>>= 7;
  }
  target[offset++] = encoded & 0x7f;
  return offset;
}

const sizeOfVarInt = (value: number): number => sizeOfUVarInt32(zigZag32(value));

/**
 * Zig-zag of a 64-bit varint when it is exact in a double (|value| ≤ 2^51, an integer); undefined
 * otherwise, and kafkajs's own `Long` code writes it (timestamp deltas are milliseconds: never).
 */
function zigZag64(value: number): number | undefined {
  if (!Number.isInteger(value) || Math.abs(value) > 2 ** 51) return undefined;
  return value >= 0 ? value * 2 : -value * 2 - 1;
}

function sizeOfUVarInt64(encoded: number): number {
  let bytes = 1;
  for (; encoded >= 0x80; encoded = Math.floor(encoded / 0x80)) bytes += 1;
  return bytes;
}

function writeUVarInt64(target: Buffer, offset: number, encoded: number): number {
  for (; encoded >= 0x80; encoded = Math.floor(encoded / 0x80)) target[offset++] = (encoded % 0x80) | 0x80;
  target[offset++] = encoded;
  return offset;
}

/** What this encoder writes itself: nothing, a string or a Buffer (anything else throws while sizing, as in kafkajs, or goes to kafkajs). */
function plainBytes(value: unknown): boolean {
  return value == null || typeof value === 'string' || Buffer.isBuffer(value) || (typeof value !== 'object' && typeof value !== 'function');
}

/** A key, value or header value: a Buffer as is, anything else as kafkajs writes it (its UTF-8 text). */
function byteLengthOf(value: Buffer | string): number {
  // Buffer.byteLength throws on what is neither, as kafkajs's sizing does.
  return Buffer.byteLength(value);
}

function writeBytes(target: Buffer, offset: number, value: Buffer | string | null | undefined, length: number): number {
  if (value == null) return writeUVarInt32(target, offset, zigZag32(-1));
  offset = writeUVarInt32(target, offset, zigZag32(length));
  if (Buffer.isBuffer(value)) return offset + value.copy(target, offset);
  return offset + target.write(String(value), offset, length, 'utf8');
}

const sizeOfBytes = (value: Buffer | string | null | undefined, length: number): number => (value == null ? sizeOfVarInt(-1) : sizeOfVarInt(length) + length);

/** A record encoder writing kafkajs's record v0 bytes into one buffer (`Encoder` is kafkajs's class). */
export function singleBufferRecordEncoder(Encoder: EncoderClass, shipped?: RecordEncoder): RecordEncoder {
  return (record) => {
    const { offsetDelta = 0, timestampDelta = 0, key, value, headers = {} } = record;
    // kafkajs's order: the timestamp is sized first, then the offset, the key, the value and the
    // headers, so that a record wrong in two ways fails as it would there.
    const timestamp = zigZag64(timestampDelta);
    // The rare delta beyond 2^51 ms goes through kafkajs's own Long arithmetic.
    const timestampBytes = timestamp === undefined ? new Encoder(10).writeVarLong(timestampDelta).buffer : undefined;
    const keys: string[] = [];
    const values: HeaderValue[] = [];
    for (const headerKey of Object.keys(headers)) {
      const headerValue = headers[headerKey] as HeaderValue | HeaderValue[];
      if (Array.isArray(headerValue)) {
        for (const item of headerValue) {
          keys.push(headerKey);
          values.push(item);
        }
      } else {
        keys.push(headerKey);
        values.push(headerValue);
      }
    }
    // Typed arrays and the like: kafkajs sizes their bytes but writes their text; left to it.
    if (shipped && (!plainBytes(key) || !plainBytes(value) || !values.every(plainBytes))) return shipped(record);
    const keyLength = key == null ? -1 : byteLengthOf(key);
    const valueLength = value == null ? -1 : byteLengthOf(value);
    // As kafkajs sizes them (a header value of null throws there as here: Buffer.byteLength(null)).
    const lengths: number[] = new Array<number>(keys.length * 2);
    let headersSize = sizeOfVarInt(keys.length);
    for (let index = 0; index < keys.length; index++) {
      const keySize = Buffer.byteLength(keys[index] as string, 'utf8');
      const valueSize = byteLengthOf(values[index] as HeaderValue);
      lengths[index * 2] = keySize;
      lengths[index * 2 + 1] = valueSize;
      headersSize += sizeOfVarInt(keySize) + keySize + sizeOfVarInt(valueSize) + valueSize;
    }
    const sizeOfBody =
      1 +
      (timestampBytes ? timestampBytes.length : sizeOfUVarInt64(timestamp as number)) +
      sizeOfVarInt(offsetDelta) +
      sizeOfBytes(key, keyLength) +
      sizeOfBytes(value, valueLength) +
      headersSize;
    const size = sizeOfVarInt(sizeOfBody) + sizeOfBody;
    // Pooled, like any small Buffer: kafkajs copies each record into its batch right away.
    const target = Buffer.allocUnsafe(size);
    let offset = writeUVarInt32(target, 0, zigZag32(sizeOfBody));
    target[offset++] = 0; // no record attributes are used
    offset = timestampBytes ? offset + timestampBytes.copy(target, offset) : writeUVarInt64(target, offset, timestamp as number);
    offset = writeUVarInt32(target, offset, zigZag32(offsetDelta));
    offset = writeBytes(target, offset, key, keyLength);
    offset = writeBytes(target, offset, value, valueLength);
    offset = writeUVarInt32(target, offset, zigZag32(keys.length));
    for (let index = 0; index < keys.length; index++) {
      offset = writeBytes(target, offset, keys[index] as string, lengths[index * 2] as number);
      offset = writeBytes(target, offset, values[index] as HeaderValue, lengths[index * 2 + 1] as number);
    }
    if (offset !== size) throw new Error(`A Kafka record came out ${offset} bytes long instead of ${size}`);
    return encoderHolding(Encoder, target);
  };
}

/** An `Encoder` of kafkajs holding `bytes` as if it had written them (its constructor would zero-fill a buffer first). */
function encoderHolding(Encoder: EncoderClass, bytes: Buffer): KafkaEncoder {
  const encoder = Object.create(Encoder.prototype) as KafkaEncoder & EncoderFields;
  encoder.buf = bytes;
  encoder.offset = bytes.length;
  return encoder;
}

/** kafkajs 2.2.4's record module, without comments and whitespace: only this one is replaced. */
const SHIPPED =
  '({offsetDelta=0,timestampDelta=0,key,value,headers={}})=>{constheadersArray=Object.keys(headers).flatMap(headerKey=>!Array.isArray(headers[headerKey])?[{key:headerKey,value:headers[headerKey]}]:headers[headerKey].map(headerValue=>({key:headerKey,value:headerValue})))constsizeOfBody=1+Encoder.sizeOfVarLong(timestampDelta)+Encoder.sizeOfVarInt(offsetDelta)+Encoder.sizeOfVarIntBytes(key)+Encoder.sizeOfVarIntBytes(value)+sizeOfHeaders(headersArray)returnnewEncoder().writeVarInt(sizeOfBody).writeInt8(0).writeVarLong(timestampDelta).writeVarInt(offsetDelta).writeVarIntBytes(key).writeVarIntBytes(value).writeVarIntArray(headersArray.map(Header))}';

const ENCODER_MODULE = 'kafkajs/src/protocol/encoder';

/** Written by both encoders when installing: the bytes must agree. */
const SAMPLE_RECORD: RecordInput = {
  offsetDelta: 300,
  timestampDelta: -70_000,
  key: 'tenant:aggregate',
  value: Buffer.from('{"sealed":"Ω"}'),
  headers: { 'message-id': '0e3d1f7a-5b9c-4c55-9a8e-3f1f6d2b8c11', 'payload-key': Buffer.alloc(140, 1), many: ['a', 'ü'] },
};

/**
 * Puts the single-buffer record encoder in place of kafkajs's; returns whether kafkajs will use it
 * (false: kafkajs's record module differs from the one this was written for, or its produce
 * request had already loaded the shipped one: kafkajs then runs as shipped).
 */
export function fixKafkajsRecordEncoder(): boolean {
  return swapKafkajsModule<RecordEncoder>({
    module: 'kafkajs/src/protocol/recordBatch/record/v0',
    loadedBy: 'kafkajs/src/protocol/requests/produce/v3/request',
    shipped: SHIPPED,
    replacement: (shipped) => {
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const candidate = singleBufferRecordEncoder(require(ENCODER_MODULE) as EncoderClass, shipped);
      // The Encoder's fields are internal: a kafkajs whose Encoder differs is left as shipped.
      return candidate(SAMPLE_RECORD).buffer.equals(shipped(SAMPLE_RECORD).buffer) ? candidate : undefined;
    },
  });
}
