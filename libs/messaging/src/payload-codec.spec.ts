import { KeyEncryptionKey, LocalKeyProvider, TransitCipher } from '@mission/crypto';
import { PAYLOAD_ENCRYPTION_HEADER, PAYLOAD_KEY_HEADER, plainJsonCodec, sealedJsonCodec } from './payload-codec';

const TENANT = '7d0f7c1e-5a43-4d3e-8f0a-0b8f3c1d2e01';
const OTHER_TENANT = '7d0f7c1e-5a43-4d3e-8f0a-0b8f3c1d2e02';
const headers = { 'message-id': 'm-1', 'message-type': 'mission.submit', 'tenant-id': TENANT };

describe('payload codecs', () => {
  const kek = KeyEncryptionKey.generate();
  const codec = () => sealedJsonCodec(new TransitCipher(new LocalKeyProvider(kek)));

  it('seals a tenant payload with its key beside it, and opens it back to the same JSON', async () => {
    const encoded = await codec().encode({ objective: 'canary-7', n: 1 }, headers);
    expect(Buffer.isBuffer(encoded.value)).toBe(true);
    expect((encoded.value as Buffer).toString('latin1')).not.toContain('canary-7');
    expect(encoded.headers[PAYLOAD_ENCRYPTION_HEADER]).toBe('aes-256-gcm');
    expect(encoded.headers[PAYLOAD_KEY_HEADER]).toMatch(/^[0-9a-f]{16}:/);
    await expect(codec().decode(encoded.value as Buffer, { ...headers, ...encoded.headers })).resolves.toEqual({ objective: 'canary-7', n: 1 });
  });

  it('seals operator traffic (no tenant) under the platform key, which no tenant header opens', async () => {
    const operator = { 'message-id': 'm-2', 'message-type': 'identity.tenant.create' };
    const encoded = await codec().encode({ clientSecret: 'shown-once' }, operator);
    await expect(codec().decode(encoded.value as Buffer, { ...operator, ...encoded.headers })).resolves.toEqual({ clientSecret: 'shown-once' });
    await expect(codec().decode(encoded.value as Buffer, { ...operator, ...encoded.headers, 'tenant-id': TENANT })).rejects.toThrow('failed authentication');
  });

  it('refuses a body under another tenant or message id, an unsealed body, an unknown scheme and a missing key', async () => {
    const encoded = await codec().encode({ objective: 'x' }, headers);
    const sealedHeaders = { ...headers, ...encoded.headers };
    const body = encoded.value as Buffer;
    await expect(codec().decode(body, { ...sealedHeaders, 'tenant-id': OTHER_TENANT })).rejects.toThrow('failed authentication');
    await expect(codec().decode(body, { ...sealedHeaders, 'message-id': 'm-9' })).rejects.toThrow('failed authentication');
    await expect(codec().decode(body, { ...sealedHeaders, 'message-type': 'mission.cancel' })).rejects.toThrow('failed authentication');
    await expect(codec().decode(body, { ...sealedHeaders, 'tenant-id': 'not-a-tenant' })).rejects.toThrow('valid tenant-id');
    await expect(codec().decode(Buffer.from('{"objective":"x"}'), headers)).rejects.toThrow('Unencrypted payload refused');
    await expect(codec().decode(body, { ...sealedHeaders, [PAYLOAD_ENCRYPTION_HEADER]: 'rot13' })).rejects.toThrow('Unknown payload encryption rot13');
    await expect(codec().decode(body, { ...headers, [PAYLOAD_ENCRYPTION_HEADER]: 'aes-256-gcm' })).rejects.toThrow('without its key');
    await expect(codec().encode({}, { 'message-type': 'x' })).rejects.toThrow('needs a message-id');
  });

  it('keeps plain JSON plain, and tells a bus without a cipher that it was handed a sealed body', async () => {
    const encoded = await plainJsonCodec.encode({ a: 1 }, headers);
    expect(encoded).toEqual({ value: '{"a":1}', headers: {} });
    await expect(plainJsonCodec.decode(Buffer.from('{"a":1}'), headers)).resolves.toEqual({ a: 1 });
    const sealed = await codec().encode({ a: 1 }, headers);
    await expect(plainJsonCodec.decode(sealed.value as Buffer, { ...headers, ...sealed.headers })).rejects.toThrow('configure the KEK');
  });

  it('binds a reply to its request and its status, and a request to its reply topic and deadline', async () => {
    const reply = { 'message-id': 'r-1', 'message-type': 'reply', 'correlation-id': 'req-1', 'reply-status': 'error', 'tenant-id': TENANT };
    const encoded = await codec().encode({ ok: false }, reply);
    const sealedReply = { ...reply, ...encoded.headers };
    await expect(codec().decode(encoded.value as Buffer, sealedReply)).resolves.toEqual({ ok: false });
    await expect(codec().decode(encoded.value as Buffer, { ...sealedReply, 'correlation-id': 'req-of-another-tenant' })).rejects.toThrow('failed authentication');
    await expect(codec().decode(encoded.value as Buffer, { ...sealedReply, 'reply-status': 'ok' })).rejects.toThrow('failed authentication');
    const request = { ...headers, 'reply-to': 'replies.gateway.a', 'request-deadline': '1000' };
    const sent = await codec().encode({ id: 'x' }, request);
    await expect(codec().decode(sent.value as Buffer, { ...request, ...sent.headers, 'request-deadline': '9999999999999' })).rejects.toThrow('failed authentication');
    await expect(codec().decode(sent.value as Buffer, { ...request, ...sent.headers, 'reply-to': 'replies.attacker.b' })).rejects.toThrow('failed authentication');
  });
});
