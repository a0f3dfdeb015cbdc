import { randomBytes } from 'node:crypto';
import { hashSecret, verifySecret } from '@mission/crypto';

export { SCRYPT_PARAMETERS } from '@mission/crypto';

export function generateClientId(): string {
  return `cl_${randomBytes(16).toString('hex')}`;
}

/** 256 random bits, base64url: safe in a Basic header and in a form body without escaping. */
export function generateClientSecret(): string {
  return randomBytes(32).toString('base64url');
}

/** Client secrets are stored as salted scrypt hashes only. */
export const hashClientSecret = hashSecret;

/** Whether `presented` is the secret behind `stored`; constant-time, and false for any malformed input. */
export const verifyClientSecret = verifySecret;
