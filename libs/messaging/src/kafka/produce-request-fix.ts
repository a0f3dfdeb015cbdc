import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { buf as crc32c } from 'crc-32/crc32c';
import { swapKafkajsModule } from './kafkajs-module-swap';
import type { KafkaEncoder } from './record-encoder-fix';

/**
 * kafkajs 2.2.4 encodes a produce request through six nested `Encoder`s per partition and two more
 * per request, each starting as a zero-filled 512-byte buffer: the records are copied into the
 * batch body, the body into the batch (after its CRC), the batch into the record set, the record
 * set into the partition, the partition into the topic and the topic into the request, each copy
 * into a buffer grown (zero-filled again, and copied) to the next power of two; and each level is
 * an async function awaited by the next. Under the distributed read a produce request carries a
 * handful of records of about 600 bytes, and encoding it was a tenth of mission-service's busy time
 * and a twelfth of the gateway's (CPU profiles, `bench/README.md`).
 *
 * The request below writes the same bytes into one buffer sized for the whole request: the
 * records as kafkajs's record module encodes them (our single-buffer one, `record-encoder-fix.ts`),
 * the batch header around them and its CRC-32C computed over the bytes in place (`castagnoli`).
 * Everything else about the request (its API key and version, whether it expects a response,
 * compressed batches) is kafkajs's: the shipped request is built and only its `encode` replaced,
 * and a request with a compression codec keeps kafkajs's `encode`. The fix replaces
 * kafkajs's produce request module before kafkajs loads it (lazily, with the first produce request;
 * versions 4 to 7 reuse version 3's), and only when that module, the record batch's and the
 * `Encoder`'s files have the SHA-256 digests of kafkajs 2.2.4's (KAFKAJS_MODULE_DIGESTS) and an
 * `Encoder` made here gives back its bytes; `produce-request-fix.spec.ts` compares the bytes with
 * kafkajs's on generated requests.
 */

/** kafkajs's 64-bit integer class (a BigInt inside), the part this module uses. */
interface KafkaLong {
  getHighBits(): number;
  getLowBits(): number;
}

interface LongClass {
  fromValue(value: unknown): KafkaLong;
}

interface EncoderClass {
  readonly prototype: KafkaEncoder;
}

/** A message as the producer hands it to the request: what the record encoder takes, and a timestamp. */
export interface ProduceMessage {
  readonly key?: Buffer | string | null;
  readonly value?: Buffer | string | null;
  readonly headers?: Readonly<Record<string, unknown>>;
  readonly timestamp?: number | string | null;
  readonly [field: string]: unknown;
}

export interface ProducePartition {
  readonly partition: number;
  readonly firstSequence?: number;
  readonly messages: readonly ProduceMessage[];
}

export interface ProduceTopic {
  readonly topic: string;
  readonly partitions: readonly ProducePartition[];
}

export interface ProduceRequestInput {
  readonly acks: number;
  readonly timeout: number;
  readonly transactionalId?: string | null;
  readonly producerId?: unknown;
  readonly producerEpoch?: number;
  readonly compression?: number;
  readonly topicData: readonly ProduceTopic[];
}

export interface ProduceRequest {
  readonly apiKey: number;
  readonly apiVersion: number;
  readonly apiName: string;
  expectResponse(): boolean;
  encode(): Promise<KafkaEncoder>;
}

export type ProduceRequestFactory = (input: ProduceRequestInput) => ProduceRequest;

type RecordEncoder = (record: Record<string, unknown>) => KafkaEncoder;

/** What the one-buffer request needs: kafkajs's record encoder, `Long` and `Encoder`, and a CRC-32C. */
export interface ProduceEncoding {
  readonly record: RecordEncoder;
  readonly crc32C: (bytes: Buffer) => number;
  readonly Long: LongClass;
  readonly Encoder: EncoderClass;
}

/** Magic byte of a record batch, v2 (kafkajs's MAGIC_BYTE). */
const MAGIC_BYTE = 2;
/** The attributes bit of a transactional batch (kafkajs's TRANSACTIONAL_MASK). */
const TRANSACTIONAL = 16;
/** kafkajs's `Types.None`: the only codec this encoder writes. */
const NO_COMPRESSION = 0;
/** From a batch's first offset to its records' count: offset, length, leader epoch, magic, CRC, attributes, last offset delta, two timestamps, producer id and epoch, first sequence. */
const BATCH_HEADER = 8 + 4 + 4 + 1 + 4 + 2 + 4 + 8 + 8 + 8 + 2 + 4;
/** Where the CRC-32C's bytes begin within a batch: from the attributes. */
const CRC_FROM = 8 + 4 + 4 + 1 + 4;
const TWO_TO_32 = 2 ** 32;

/** A partition's batch, its records encoded, as kafkajs builds it. */
interface PartitionBatch {
  readonly partition: number;
  readonly firstSequence: number;
  readonly firstTimestamp: unknown;
  readonly maxTimestamp: unknown;
  readonly records: readonly Buffer[];
  readonly recordBytes: number;
}

/** A big-endian 64-bit integer, as kafkajs's `writeInt64` writes it (through its `Long` unless a safe integer). */
function writeInt64(target: Buffer, offset: number, value: unknown, Long: LongClass): number {
  if (typeof value === 'number' && Number.isSafeInteger(value)) {
    const high = Math.floor(value / TWO_TO_32);
    target.writeInt32BE(high, offset);
    target.writeUInt32BE(value - high * TWO_TO_32, offset + 4);
  } else {
    const long = Long.fromValue(value);
    target.writeInt32BE(long.getHighBits(), offset);
    target.writeInt32BE(long.getLowBits(), offset + 4);
  }
  return offset + 8;
}

/** An INT16-length string (null: length -1), as kafkajs's `writeString` writes it. */
function writeString(target: Buffer, offset: number, value: string | null, length: number): number {
  if (value === null) return target.writeInt16BE(-1, offset);
  offset = target.writeInt16BE(length, offset);
  return offset + target.write(value, offset, length, 'utf8');
}

/** Bytes of a nullable INT16-length string; throws on what is not a string, as kafkajs's `Buffer.byteLength` does. */
const stringLength = (value: string | null): number => (value === null ? 0 : Buffer.byteLength(value, 'utf8'));

/** The partition's records, encoded with kafkajs's timestamps: the messages' own (sorted as kafkajs sorts them), or now. */
function partitionBatch({ partition, messages, firstSequence = 0 }: ProducePartition, record: RecordEncoder): PartitionBatch {
  const dateNow = Date.now();
  // kafkajs sorts the timestamps with Array.prototype.sort's default order (as text): kept.
  const stamped = messages.map((message) => message.timestamp).filter((timestamp) => timestamp != null) as Array<number | string>;
  const timestamps = stamped.length === 0 ? [dateNow] : stamped.sort();
  const firstTimestamp = timestamps[0] as number | string;
  const maxTimestamp = timestamps[timestamps.length - 1] as number | string;
  const records: Buffer[] = new Array<Buffer>(messages.length);
  let recordBytes = 0;
  for (let index = 0; index < messages.length; index++) {
    const message = messages[index] as ProduceMessage;
    const encoded = record({
      ...message,
      offsetDelta: index,
      timestampDelta: ((message.timestamp || dateNow) as number) - (firstTimestamp as number),
    });
    // kafkajs's batch takes Encoders only (its writeEncoderArray's check and message).
    if (encoded == null || !Buffer.isBuffer((encoded as { buf?: unknown }).buf)) throw new Error('all values should be an instance of Encoder[]');
    const bytes = encoded.buffer;
    records[index] = bytes;
    recordBytes += bytes.length;
  }
  return { partition, firstSequence, firstTimestamp, maxTimestamp, records, recordBytes };
}

/** The whole produce request body (what kafkajs's v3 `encode` writes), in one buffer. */
export function encodeProduceRequest(input: ProduceRequestInput, encoding: ProduceEncoding): Buffer {
  const { acks, timeout, transactionalId = null, producerEpoch = 0, topicData } = input;
  const producerId = input.producerId === undefined ? -1 : input.producerId;
  const attributes = NO_COMPRESSION | (transactionalId ? TRANSACTIONAL : 0);
  const transactionalIdLength = stringLength(transactionalId);
  // Encoded topic by topic and partition by partition, in kafkajs's order (each partition reads the clock).
  const topics = topicData.map(({ topic, partitions }) => ({ topic, topicLength: stringLength(topic), batches: partitions.map((data) => partitionBatch(data, encoding.record)) }));
  let size = 2 + transactionalIdLength + 2 + 4 + 4;
  for (const { topicLength, batches } of topics) {
    size += 2 + topicLength + 4;
    for (const batch of batches) size += 4 + 4 + BATCH_HEADER + 4 + batch.recordBytes;
  }
  // Every byte up to `size` is written below (checked at the end): nothing of the pool's earlier contents is sent.
  const target = Buffer.allocUnsafe(size);
  let offset = writeString(target, 0, transactionalId, transactionalIdLength);
  offset = target.writeInt16BE(acks, offset);
  offset = target.writeInt32BE(timeout, offset);
  offset = target.writeInt32BE(topics.length, offset);
  for (const { topic, topicLength, batches } of topics) {
    offset = writeString(target, offset, topic, topicLength);
    offset = target.writeInt32BE(batches.length, offset);
    for (const batch of batches) {
      const batchSize = BATCH_HEADER + 4 + batch.recordBytes;
      offset = target.writeInt32BE(batch.partition, offset);
      offset = target.writeInt32BE(batchSize, offset);
      const start = offset;
      offset = writeInt64(target, offset, 0, encoding.Long); // first offset
      offset = target.writeInt32BE(batchSize - 12, offset); // the batch's bytes after offset and length
      offset = target.writeInt32BE(0, offset); // partition leader epoch
      offset = target.writeInt8(MAGIC_BYTE, offset);
      const crcAt = offset;
      offset += 4;
      offset = target.writeInt16BE(attributes, offset);
      offset = target.writeInt32BE(batch.records.length - 1, offset); // last offset delta
      offset = writeInt64(target, offset, batch.firstTimestamp, encoding.Long);
      offset = writeInt64(target, offset, batch.maxTimestamp, encoding.Long);
      offset = writeInt64(target, offset, producerId, encoding.Long);
      offset = target.writeInt16BE(producerEpoch, offset);
      offset = target.writeInt32BE(batch.firstSequence, offset);
      offset = target.writeInt32BE(batch.records.length, offset);
      for (const bytes of batch.records) offset += bytes.copy(target, offset);
      if (offset - start !== batchSize) throw new Error(`A Kafka record batch came out ${offset - start} bytes long instead of ${batchSize}`);
      target.writeUInt32BE(encoding.crc32C(target.subarray(start + CRC_FROM, offset)), crcAt);
    }
  }
  if (offset !== size) throw new Error(`A Kafka produce request came out ${offset} bytes long instead of ${size}`);
  return target;
}

/**
 * CRC-32C of a record batch, unsigned as kafkajs's: `crc-32`'s table-driven one, 16 bytes a step,
 * four to five times as fast as kafkajs's byte at a time (the spec compares the two on random bytes).
 */
export const castagnoli = (bytes: Uint8Array): number => crc32c(bytes) >>> 0;

/** An `Encoder` of kafkajs holding `bytes` as if it had written them. */
function encoderHolding(Encoder: EncoderClass, bytes: Buffer): KafkaEncoder {
  const encoder = Object.create(Encoder.prototype) as KafkaEncoder & { buf: Buffer; offset: number };
  encoder.buf = bytes;
  encoder.offset = bytes.length;
  return encoder;
}

/** kafkajs's produce request with its `encode` writing one buffer (compressed batches stay kafkajs's). */
export function singleBufferProduceRequest(shipped: ProduceRequestFactory, encoding: ProduceEncoding): ProduceRequestFactory {
  return (input) => {
    const request = shipped(input);
    // Any codec, and anything kafkajs itself would refuse (null), stays with kafkajs's encode.
    if (input.compression !== undefined && input.compression !== NO_COMPRESSION) return request;
    return { ...request, encode: async () => encoderHolding(encoding.Encoder, encodeProduceRequest(input, encoding)) };
  };
}

/** kafkajs 2.2.4's produce request v3 module's export, without comments and whitespace. */
const SHIPPED =
  "({acks,timeout,transactionalId=null,producerId=Long.fromInt(-1),producerEpoch=0,compression=Types.None,topicData,})=>({apiKey,apiVersion:3,apiName:'Produce',expectResponse:()=>acks!==0,encode:async()=>{constencodeTopic=topicEncoder(compression)constencodedTopicData=[]for(constdataoftopicData){encodedTopicData.push(awaitencodeTopic({...data,transactionalId,producerId,producerEpoch}))}returnnewEncoder().writeString(transactionalId).writeInt16(acks).writeInt32(timeout).writeArray(encodedTopicData)},})";

const PRODUCE_REQUEST_MODULE = 'kafkajs/src/protocol/requests/produce/v3/request';

/**
 * SHA-256 (whitespace removed) of kafkajs 2.2.4's module files whose code the encoder reproduces:
 * the produce request's topic and partition encoders, the record batch, and the `Encoder` whose
 * integers, strings and fields it writes as they do.
 */
export const KAFKAJS_MODULE_DIGESTS: Readonly<Record<string, string>> = {
  [PRODUCE_REQUEST_MODULE]: 'bf8f65c89f55e55ca17fe0276bb9a9ef882e5e96b6537748f42145c845168556',
  'kafkajs/src/protocol/recordBatch/v0': 'ff34c634ffef071e26c51d5f5aca5cd213dc559886d358286ba6c4a9be1fdfc7',
  'kafkajs/src/protocol/encoder': 'c17018736410b899236d1884d83bb1f419f56c40b5627073ff5c7b2d66b51bec',
};

/** A module file's SHA-256, whitespace removed; undefined when it cannot be read. */
export function moduleDigest(module: string): string | undefined {
  try {
    return createHash('sha256')
      .update(readFileSync(require.resolve(module), 'utf8').replace(/\s+/g, ''))
      .digest('hex');
  } catch {
    return undefined;
  }
}

/**
 * Puts the one-buffer produce request in place of kafkajs's; returns whether kafkajs will use it
 * (false: kafkajs's produce request, record batch or Encoder is not the one this was written for,
 * or kafkajs already loaded them; kafkajs then runs as shipped). Call after the record encoder's
 * fix: the request encodes its records with whichever record module kafkajs has by then.
 */
export function fixKafkajsProduceRequest(digests: Readonly<Record<string, string>> = KAFKAJS_MODULE_DIGESTS): boolean {
  return swapKafkajsModule<ProduceRequestFactory>({
    module: PRODUCE_REQUEST_MODULE,
    // Versions 4 and 5 hold version 3's module from when they load (6 and 7 reuse 5).
    loadedBy: ['kafkajs/src/protocol/requests/produce/v4/request', 'kafkajs/src/protocol/requests/produce/v5/request'],
    shipped: SHIPPED,
    replacement: (shipped) => {
      if (Object.entries(digests).some(([module, digest]) => moduleDigest(module) !== digest)) return undefined;
      /* eslint-disable @typescript-eslint/no-require-imports */
      const Encoder = require('kafkajs/src/protocol/encoder') as EncoderClass;
      // An Encoder made here must give its bytes back as one kafkajs wrote (its fields are internal).
      const probe = Buffer.from([1, 2, 3]);
      if (!encoderHolding(Encoder, probe).buffer.equals(probe)) return undefined;
      return singleBufferProduceRequest(shipped, {
        record: require('kafkajs/src/protocol/recordBatch/record/v0') as RecordEncoder,
        crc32C: castagnoli,
        Long: require('kafkajs/src/utils/long') as LongClass,
        Encoder,
      });
      /* eslint-enable @typescript-eslint/no-require-imports */
    },
  });
}
