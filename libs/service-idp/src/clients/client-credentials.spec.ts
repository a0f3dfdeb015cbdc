import { generateClientId, generateClientSecret, hashClientSecret, SCRYPT_PARAMETERS, verifyClientSecret } from './client-credentials';

describe('client credentials', () => {
  it('issues client ids with the cl_ prefix and 256-bit base64url secrets', () => {
    expect(generateClientId()).toMatch(/^cl_[0-9a-f]{32}$/);
    const secret = generateClientSecret();
    expect(secret).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(Buffer.from(secret, 'base64url')).toHaveLength(32);
    expect(generateClientSecret()).not.toBe(secret);
  });

  it('stores a secret only as a salted scrypt hash that does not contain it', async () => {
    const secret = generateClientSecret();
    const hash = await hashClientSecret(secret);
    const { N, r, p } = SCRYPT_PARAMETERS;
    expect(hash).toMatch(new RegExp(`^scrypt\\$${N}\\$${r}\\$${p}\\$[A-Za-z0-9_-]{22}\\$[A-Za-z0-9_-]{43}$`));
    expect(hash).not.toContain(secret);
    expect(await hashClientSecret(secret)).not.toBe(hash);
  });

  it('accepts the right secret and refuses any other', async () => {
    const hash = await hashClientSecret('correct horse battery staple');
    await expect(verifyClientSecret('correct horse battery staple', hash)).resolves.toBe(true);
    await expect(verifyClientSecret('correct horse battery stapl', hash)).resolves.toBe(false);
    await expect(verifyClientSecret('', hash)).resolves.toBe(false);
    await expect(verifyClientSecret(undefined, hash)).resolves.toBe(false);
  });

  it('refuses stored values that are not a well-formed hash, including a plain secret', async () => {
    const hash = await hashClientSecret('s3cret');
    const parts = hash.split('$');
    const tampered = (index: number, value: string): string => parts.map((part, i) => (i === index ? value : part)).join('$');
    for (const stored of [
      's3cret',
      undefined,
      '',
      tampered(0, 'bcrypt'),
      tampered(1, String(2 ** 30)),
      tampered(1, '1000'),
      tampered(2, '0'),
      tampered(5, 'AAAA'),
      hash.replace(/\$[^$]+$/, ''),
    ]) {
      await expect(verifyClientSecret('s3cret', stored)).resolves.toBe(false);
    }
  });
});
