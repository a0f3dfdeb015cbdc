/**
 * kafkajs 2.2.4 encodes each record of a produce request with one `Encoder` for the record and one
 * more for every header, and each `Encoder` starts as a zero-filled 512-byte buffer; the headers'
 * buffers are then copied into the record's, and the record's grows (another zero-filled buffer and
 * a copy) once it passes 512 bytes. Our messages carry eight or nine headers (ids, type, tenant,
 * trace, reply-to, deadline, the sealed payload's key), so each record cost ten allocations of
 * zeroed memory and as many copies: the record encoder (headers included) was 8 to 10 % of a service's
 * samples under the distributed read.
 *
 * The record below writes the same bytes into one `Encoder` sized for the whole record, which
 * kafkajs's size computation already knows. It replaces kafkajs's record module before kafkajs
 * first needs it (the module is loaded lazily by the produce request), and only when that module
 * is the one kafkajs 2.2.4 ships; `record-encoder-fix.spec.ts` checks the bytes against kafkajs's.
 */

/** kafkajs's Encoder, the part this module uses (the package ships no declarations for it). */
export interface KafkaEncoder {
  readonly buffer: Buffer;
  writeVarInt(value: number): KafkaEncoder;
  writeInt8(value: number): KafkaEncoder;
  writeVarLong(value: number): KafkaEncoder;
  writeVarIntBytes(value: Buffer | string | null | undefined): KafkaEncoder;
  writeVarIntString(value: string): KafkaEncoder;
}

interface EncoderClass {
  new (initialSize?: number): KafkaEncoder;
  sizeOfVarInt(value: number): number;
  sizeOfVarLong(value: number): number;
  sizeOfVarIntBytes(value: Buffer | string | null | undefined): number;
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

/** A record encoder writing kafkajs's record v0 bytes into one buffer (`Encoder` is kafkajs's class). */
export function singleBufferRecordEncoder(Encoder: EncoderClass): RecordEncoder {
  return ({ offsetDelta = 0, timestampDelta = 0, key, value, headers = {} }) => {
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
    // As kafkajs sizes them (a header value of null throws there as here: Buffer.byteLength(null)).
    let headersSize = Encoder.sizeOfVarInt(keys.length);
    for (let index = 0; index < keys.length; index++) {
      const keySize = Buffer.byteLength(keys[index] as string);
      const valueSize = Buffer.byteLength(values[index] as HeaderValue);
      headersSize += Encoder.sizeOfVarInt(keySize) + keySize + Encoder.sizeOfVarInt(valueSize) + valueSize;
    }
    const sizeOfBody =
      1 + Encoder.sizeOfVarLong(timestampDelta) + Encoder.sizeOfVarInt(offsetDelta) + Encoder.sizeOfVarIntBytes(key) + Encoder.sizeOfVarIntBytes(value) + headersSize;
    const encoder = new Encoder(Encoder.sizeOfVarInt(sizeOfBody) + sizeOfBody)
      .writeVarInt(sizeOfBody)
      .writeInt8(0) // no record attributes are used
      .writeVarLong(timestampDelta)
      .writeVarInt(offsetDelta)
      .writeVarIntBytes(key)
      .writeVarIntBytes(value)
      .writeVarInt(keys.length);
    for (let index = 0; index < keys.length; index++) encoder.writeVarIntString(keys[index] as string).writeVarIntBytes(values[index] as HeaderValue);
    return encoder;
  };
}

/** kafkajs 2.2.4's record module, without comments and whitespace: only this one is replaced. */
const SHIPPED =
  '({offsetDelta=0,timestampDelta=0,key,value,headers={}})=>{constheadersArray=Object.keys(headers).flatMap(headerKey=>!Array.isArray(headers[headerKey])?[{key:headerKey,value:headers[headerKey]}]:headers[headerKey].map(headerValue=>({key:headerKey,value:headerValue})))constsizeOfBody=1+Encoder.sizeOfVarLong(timestampDelta)+Encoder.sizeOfVarInt(offsetDelta)+Encoder.sizeOfVarIntBytes(key)+Encoder.sizeOfVarIntBytes(value)+sizeOfHeaders(headersArray)returnnewEncoder().writeVarInt(sizeOfBody).writeInt8(0).writeVarLong(timestampDelta).writeVarInt(offsetDelta).writeVarIntBytes(key).writeVarIntBytes(value).writeVarIntArray(headersArray.map(Header))}';

const RECORD_MODULE = 'kafkajs/src/protocol/recordBatch/record/v0';
const PRODUCE_REQUEST_MODULE = 'kafkajs/src/protocol/requests/produce/v3/request';
const ENCODER_MODULE = 'kafkajs/src/protocol/encoder';

function withoutCommentsOrSpace(source: string): string {
  return source.replace(/\/\/[^\n]*/g, '').replace(/\s+/g, '');
}

let installed: RecordEncoder | undefined;

/**
 * Puts the single-buffer record encoder in place of kafkajs's; returns whether kafkajs will use it
 * (false: kafkajs's record module differs from the one this was written for, or its produce
 * request had already loaded the shipped one: kafkajs then runs as shipped).
 */
export function fixKafkajsRecordEncoder(): boolean {
  let recordPath: string;
  try {
    recordPath = require.resolve(RECORD_MODULE);
  } catch {
    return false;
  }
  const cached = require.cache[recordPath];
  if (installed && cached?.exports === installed) return true;
  try {
    const producePath = require.resolve(PRODUCE_REQUEST_MODULE);
    // Already loaded: it holds the record module it found then.
    if (require.cache[producePath]) return false;
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const shipped = require(RECORD_MODULE) as unknown;
    if (typeof shipped !== 'function' || withoutCommentsOrSpace(shipped.toString()) !== SHIPPED) return false;
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const Encoder = require(ENCODER_MODULE) as EncoderClass;
    const module = require.cache[recordPath];
    if (!module) return false;
    installed = singleBufferRecordEncoder(Encoder);
    // require.cache is Node's documented module cache: the produce request, loaded later, gets this.
    module.exports = installed;
    return true;
  } catch {
    return false;
  }
}
