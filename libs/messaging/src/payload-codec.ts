import type { TransitCipher } from '@mission/crypto';
import { TENANT_HEADER } from '@mission/tenant-context';
import { Headers } from './bus';
import { deserialize, serialize } from './delivery';

/** Header naming the wrapped data key a sealed payload was encrypted with (`<kekId>:<wrapped key>`). */
export const PAYLOAD_KEY_HEADER = 'payload-key';
/** Header saying how the payload is encrypted; absent on a plain JSON payload. */
export const PAYLOAD_ENCRYPTION_HEADER = 'payload-encryption';
const SEALED = 'aes-256-gcm';
/** The scope of messages outside any tenant (operator traffic, replies to it). */
export const PLATFORM_SCOPE = 'platform';

/** How payloads become message bodies on the wire, and back. */
export interface PayloadCodec {
  /** The body for `payload`, and headers to add to the message (they are part of what opens it). */
  encode(payload: unknown, headers: Readonly<Record<string, string>>): Promise<{ value: Buffer | string; headers: Record<string, string> }>;
  /**
   * Throws when the body cannot be read: not JSON, or (sealed) not opened by this key, tenant and
   * message. A string body is what `encode` gave on a bus that never leaves the process.
   */
  decode(value: Buffer | string | null, headers: Readonly<Record<string, string>>): Promise<unknown>;
}

/** Plain JSON: the embedded default, where messages never leave the process. */
export const plainJsonCodec: PayloadCodec = {
  encode: async (payload) => ({ value: serialize(payload), headers: {} }),
  decode: async (value, headers) => {
    if (headers[PAYLOAD_ENCRYPTION_HEADER]) throw new Error('An encrypted payload reached a bus without a payload cipher: configure the KEK');
    return deserialize(value);
  },
};

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * The tenant a message belongs to (its `tenant-id` header), or the platform. A receiver refuses
 * anything else before any key is touched; a sender seals under whatever the header says, and the
 * receiving side's admission then refuses the message for its header.
 */
function scopeOf(headers: Readonly<Record<string, string>>, strict: boolean): string {
  const tenant = headers[TENANT_HEADER]?.toLowerCase();
  if (tenant === undefined) return PLATFORM_SCOPE;
  if (strict && !UUID.test(tenant)) throw new Error(`A sealed payload needs a valid ${TENANT_HEADER} header`);
  return tenant;
}

/**
 * The headers bound into a sealed body's tag besides its tenant: the message's identity, what it
 * is, and for requests and replies whom it answers and until when. A body moved under another
 * message, a reply moved to another request, a replayed request with a fresh deadline, or an
 * error reply turned into a success all fail to open.
 */
const BOUND_HEADERS = [Headers.messageId, Headers.messageType, Headers.correlationId, Headers.replyTo, Headers.replyStatus, 'request-deadline'] as const;

function associatedDataOf(headers: Readonly<Record<string, string>>): string {
  if (!headers[Headers.messageId]) throw new Error('A sealed payload needs a message-id header');
  return JSON.stringify(BOUND_HEADERS.map((name) => headers[name] ?? null));
}

/**
 * JSON sealed with AES-256-GCM under the data key of the message's tenant (or of the platform):
 * what a broker stores is ciphertext. The tenant and message id are bound into the tag, so a body
 * copied to another tenant's message, or another message, fails to open. An unsealed payload is
 * refused: every process on a bus with a cipher seals, so a plain one was not sent by one of them.
 */
export function sealedJsonCodec(cipher: TransitCipher): PayloadCodec {
  return {
    async encode(payload, headers) {
      const sealed = await cipher.seal(scopeOf(headers, false), Buffer.from(serialize(payload) ?? 'null', 'utf8'), associatedDataOf(headers));
      return { value: sealed.body, headers: { [PAYLOAD_ENCRYPTION_HEADER]: SEALED, [PAYLOAD_KEY_HEADER]: sealed.key } };
    },
    async decode(value, headers) {
      const encryption = headers[PAYLOAD_ENCRYPTION_HEADER];
      if (encryption === undefined) throw new Error('Unencrypted payload refused: this bus requires sealed payloads');
      if (encryption !== SEALED) throw new Error(`Unknown payload encryption ${encryption}`);
      const key = headers[PAYLOAD_KEY_HEADER];
      if (!key || !value) throw new Error('Sealed payload without its key or body');
      const body = typeof value === 'string' ? Buffer.from(value, 'utf8') : value;
      const plaintext = await cipher.open(scopeOf(headers, true), { body, key }, associatedDataOf(headers));
      return deserialize(plaintext);
    },
  };
}
