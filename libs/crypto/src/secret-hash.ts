import { randomBytes, scrypt, ScryptOptions, timingSafeEqual } from 'node:crypto';

/**
 * scrypt cost: N = 2^15, r = 8, p = 1 (32 MiB, tens of milliseconds per check). Clients ask for a
 * token about once an hour and people sign in rarely, so the cost barely shows for them and makes
 * a leaked table expensive to attack.
 */
export const SCRYPT_PARAMETERS = { N: 2 ** 15, r: 8, p: 1 } as const;
const SALT_BYTES = 16;
const KEY_BYTES = 32;
const PREFIX = 'scrypt';

/** Bounds for parameters read back from storage, so a tampered row cannot make a check hang. */
const LIMITS = { minLogN: 10, maxLogN: 20, maxR: 32, maxP: 16, minKeyBytes: 16, maxKeyBytes: 64 } as const;

function derive(secret: string, salt: Buffer, keyBytes: number, parameters: ScryptOptions & { N: number; r: number; p: number }): Promise<Buffer> {
  const maxmem = 256 * parameters.N * parameters.r;
  return new Promise((resolve, reject) => {
    scrypt(secret.normalize('NFC'), salt, keyBytes, { ...parameters, maxmem }, (error, key) => (error ? reject(error) : resolve(key)));
  });
}

/** `scrypt$N$r$p$salt$hash` with a fresh random salt: the only form in which a secret or password is stored. */
export async function hashSecret(secret: string): Promise<string> {
  const salt = randomBytes(SALT_BYTES);
  const key = await derive(secret, salt, KEY_BYTES, SCRYPT_PARAMETERS);
  const { N, r, p } = SCRYPT_PARAMETERS;
  return [PREFIX, N, r, p, salt.toString('base64url'), key.toString('base64url')].join('$');
}

interface ParsedHash {
  readonly N: number;
  readonly r: number;
  readonly p: number;
  readonly salt: Buffer;
  readonly key: Buffer;
}

function parseHash(stored: string): ParsedHash | undefined {
  const parts = stored.split('$');
  if (parts.length !== 6 || parts[0] !== PREFIX) return undefined;
  const [N, r, p] = parts.slice(1, 4).map((part) => (/^\d{1,8}$/.test(part) ? Number(part) : NaN));
  const salt = Buffer.from(parts[4], 'base64url');
  const key = Buffer.from(parts[5], 'base64url');
  const logN = Math.log2(N);
  const valid =
    Number.isInteger(logN) &&
    logN >= LIMITS.minLogN &&
    logN <= LIMITS.maxLogN &&
    r >= 1 &&
    r <= LIMITS.maxR &&
    p >= 1 &&
    p <= LIMITS.maxP &&
    salt.length >= 8 &&
    key.length >= LIMITS.minKeyBytes &&
    key.length <= LIMITS.maxKeyBytes;
  return valid ? { N, r, p, salt, key } : undefined;
}

/** Whether `presented` is the secret behind `stored`; constant-time, and false for any malformed input. */
export async function verifySecret(presented: unknown, stored: unknown): Promise<boolean> {
  if (typeof presented !== 'string' || typeof stored !== 'string' || presented.length === 0) return false;
  const parsed = parseHash(stored);
  if (!parsed) return false;
  const candidate = await derive(presented, parsed.salt, parsed.key.length, { N: parsed.N, r: parsed.r, p: parsed.p });
  return timingSafeEqual(candidate, parsed.key);
}

/** Whether `value` is a well-formed hash of this module with sane parameters (for hashes that arrive over the bus). */
export function isSecretHash(value: unknown): value is string {
  return typeof value === 'string' && value.length <= 512 && parseHash(value) !== undefined;
}
