import { swapKafkajsModule } from './kafkajs-module-swap';

/**
 * kafkajs 2.2.4 decodes each fetched record's headers with one object spread per header (a reduce
 * that copies every header read so far into a new object, then adds one), a `{ key, value }`
 * object per header before that, and the record's offset and timestamp through 64-bit `Long`
 * values: a delta read byte by byte into new `Long`s, the batch's first offset and timestamp parsed
 * from their decimal strings, added, and printed back. Our messages carry eight or nine headers, so
 * a record cost some forty short-lived objects; the record decoder was the largest part of kafkajs
 * in a service's CPU profile under the distributed read.
 *
 * The decoder below returns the same record (same fields, same header object, the same values
 * for every input, repeated and oddly named headers included), reading the headers straight into
 * one object and doing the offset and timestamp arithmetic on numbers while they are exact (offsets
 * and timestamps of up to 15 digits, deltas of up to 7 varint bytes), and through kafkajs's own
 * `Long` code otherwise. It replaces kafkajs's record decoder before kafkajs loads its record batch
 * decoder (lazily, with the first fetch response), and only when the shipped one is the one
 * kafkajs 2.2.4 ships and a sample batch decodes the same through both; `record-decoder-fix.spec.ts`
 * compares the two on generated records.
 */

/** kafkajs's Decoder, the part this module uses (the package ships no declarations for it). */
export interface KafkaDecoder {
  buffer: Buffer;
  offset: number;
  readInt8(): number;
  readVarInt(): number;
  readVarLong(): KafkaLong;
  readVarIntString(): string | null;
  readVarIntBytes(): Buffer | null;
}

interface KafkaLong {
  add(other: KafkaLong | number): KafkaLong;
  toString(): string;
}

interface LongClass {
  fromValue(value: string | number | KafkaLong): KafkaLong;
}

/** What kafkajs's record batch decoder hands each record. */
export interface RecordBatchContext {
  readonly firstOffset?: string;
  readonly firstTimestamp?: string;
  readonly maxTimestamp?: string;
  readonly timestampType?: number;
  readonly magicByte?: number;
  readonly isControlBatch?: boolean;
}

type HeaderEntry = Buffer | null | unknown;

export interface DecodedRecord {
  readonly magicByte: number | undefined;
  readonly attributes: number;
  readonly timestamp: string | undefined;
  readonly offset: string;
  readonly key: Buffer | null;
  readonly value: Buffer | null;
  readonly headers: Record<string, HeaderEntry>;
  readonly isControlRecord: boolean;
  readonly batchContext: RecordBatchContext;
}

export type RecordDecoder = (decoder: KafkaDecoder, batchContext?: RecordBatchContext) => DecodedRecord;

/** kafkajs's TimestampTypes.LOG_APPEND_TIME. */
const LOG_APPEND_TIME = 1;
/** Varint bytes whose value (at most 49 bits) stays exact in a double. */
const EXACT_VARLONG_BYTES = 7;
/** Decimal strings this long are below 2^53 with room for a 49-bit delta. */
const EXACT_DECIMAL_LENGTH = 15;
const DECIMAL = /^-?\d+$/;

/**
 * The zig-zag varlong at the decoder's position as a number when it has at most 7 bytes (the
 * decoder then moves past it); undefined, with the decoder left where it was, otherwise.
 */
function readSmallVarLong(decoder: KafkaDecoder): number | undefined {
  const { buffer } = decoder;
  let offset = decoder.offset;
  let encoded = 0;
  let scale = 1;
  for (let index = 0; index < EXACT_VARLONG_BYTES; index++) {
    const byte = buffer[offset++];
    // Past the end: kafkajs reads on regardless; its own code does the same here.
    if (byte === undefined) return undefined;
    encoded += (byte & 0x7f) * scale;
    if (byte < 0x80) {
      decoder.offset = offset;
      return encoded % 2 === 0 ? encoded / 2 : -(encoded + 1) / 2;
    }
    scale *= 0x80;
  }
  return undefined;
}

/** `base` (a decimal string) plus `delta`, printed as kafkajs's Long prints it. */
function plus(Long: LongClass, base: string | undefined, delta: number | KafkaLong): string {
  if (typeof delta === 'number' && typeof base === 'string' && base.length <= EXACT_DECIMAL_LENGTH && DECIMAL.test(base)) return String(Number(base) + delta);
  return Long.fromValue(base as string)
    .add(delta)
    .toString();
}

/** A record decoder returning what kafkajs 2.2.4's returns (`Long` is kafkajs's class). */
export function directRecordDecoder(Long: LongClass): RecordDecoder {
  return (decoder, batchContext = {}) => {
    const { firstOffset, firstTimestamp, magicByte, isControlBatch = false, timestampType, maxTimestamp } = batchContext;
    const attributes = decoder.readInt8();
    const timestampDelta = readSmallVarLong(decoder) ?? decoder.readVarLong();
    const timestamp = timestampType === LOG_APPEND_TIME && maxTimestamp ? maxTimestamp : plus(Long, firstTimestamp, timestampDelta);
    const offset = plus(Long, firstOffset, decoder.readVarInt());
    const key = decoder.readVarIntBytes();
    const value = decoder.readVarIntBytes();
    const count = decoder.readVarInt();
    // kafkajs allocates the array first: a negative count other than -1 throws there as here.
    if (count < -1) throw new RangeError('Invalid array length');
    const headers: Record<string, HeaderEntry> = {};
    for (let index = 0; index < count; index++) {
      const name = decoder.readVarIntString() as string;
      const entry = decoder.readVarIntBytes();
      // As kafkajs's reduce: a repeated name gathers its values in an array, and the lookup sees
      // what the object inherits (a header named like an Object.prototype member starts an array).
      const previous = headers[name];
      const next = previous === undefined ? entry : Array.isArray(previous) ? previous.concat([entry]) : [previous, entry];
      // kafkajs's spread defines an own property even for __proto__; assignment would set the prototype.
      if (name === '__proto__') Object.defineProperty(headers, name, { value: next, writable: true, enumerable: true, configurable: true });
      else headers[name] = next;
    }
    return { magicByte, attributes, timestamp, offset, key, value, headers, isControlRecord: isControlBatch, batchContext };
  };
}

/** kafkajs 2.2.4's record decoder, without comments and whitespace: only this one is replaced. */
const SHIPPED =
  '(decoder,batchContext={})=>{const{firstOffset,firstTimestamp,magicByte,isControlBatch=false,timestampType,maxTimestamp,}=batchContextconstattributes=decoder.readInt8()consttimestampDelta=decoder.readVarLong()consttimestamp=timestampType===TimestampTypes.LOG_APPEND_TIME&&maxTimestamp?maxTimestamp:Long.fromValue(firstTimestamp).add(timestampDelta).toString()constoffsetDelta=decoder.readVarInt()constoffset=Long.fromValue(firstOffset).add(offsetDelta).toString()constkey=decoder.readVarIntBytes()constvalue=decoder.readVarIntBytes()constheaders=decoder.readVarIntArray(HeaderDecoder).reduce((obj,{key,value})=>({...obj,[key]:obj[key]===undefined?value:Array.isArray(obj[key])?obj[key].concat([value]):[obj[key],value],}),{})return{magicByte,attributes,timestamp,offset,key,value,headers,isControlRecord:isControlBatch,batchContext,}}';

const DECODER_MODULE = 'kafkajs/src/protocol/decoder';
const LONG_MODULE = 'kafkajs/src/utils/long';

/** Decoded by both decoders when installing: the records must agree. */
function sampleAgrees(candidate: RecordDecoder, shipped: RecordDecoder, Decoder: new (buffer: Buffer) => KafkaDecoder): boolean {
  // A record as kafkajs's encoder writes it: attributes, timestamp delta -70000, offset delta 300,
  // key "k", value "v", headers a=x, a=y, b=z (the bytes after the record's length).
  const bytes = Buffer.from([0x00, 0xdf, 0xc5, 0x08, 0xd8, 0x04, 0x02, 0x6b, 0x02, 0x76, 0x06, 0x02, 0x61, 0x02, 0x78, 0x02, 0x61, 0x02, 0x79, 0x02, 0x62, 0x02, 0x7a]);
  // Offsets as numbers (a short base) and through kafkajs's Long (a base past 2^53).
  const samples: Array<[firstOffset: string, offset: string]> = [
    ['41', '341'],
    ['9007199254740993', '9007199254741293'],
  ];
  return samples.every(([firstOffset, offset]) => {
    const context: RecordBatchContext = { firstOffset, firstTimestamp: '1764000000000', maxTimestamp: '1764000000000', timestampType: 0, magicByte: 2, isControlBatch: false };
    const ours = candidate(new Decoder(bytes), context);
    const theirs = shipped(new Decoder(bytes), context);
    return JSON.stringify(ours) === JSON.stringify(theirs) && ours.offset === offset && ours.timestamp === '1763999930000';
  });
}

/**
 * Puts the direct record decoder in place of kafkajs's; returns whether kafkajs will use it (false:
 * kafkajs's record decoder differs from the one this was written for, or its record batch decoder
 * had already loaded the shipped one: kafkajs then runs as shipped).
 */
export function fixKafkajsRecordDecoder(): boolean {
  return swapKafkajsModule<RecordDecoder>({
    module: 'kafkajs/src/protocol/recordBatch/record/v0/decoder',
    loadedBy: 'kafkajs/src/protocol/recordBatch/v0/decoder',
    shipped: SHIPPED,
    replacement: (shipped) => {
      /* eslint-disable @typescript-eslint/no-require-imports */
      const candidate = directRecordDecoder(require(LONG_MODULE) as LongClass);
      return sampleAgrees(candidate, shipped, require(DECODER_MODULE) as new (buffer: Buffer) => KafkaDecoder) ? candidate : undefined;
      /* eslint-enable @typescript-eslint/no-require-imports */
    },
  });
}
