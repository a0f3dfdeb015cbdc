import { z } from 'zod';
import { DomainError, ErrorCode, FieldError } from './errors';

function fieldOf(path: readonly PropertyKey[]): string {
  return path.length === 0 ? '(body)' : path.map(String).join('.');
}

/**
 * Payload of a "get by id" request. Ids are opaque to clients, so any string a path can carry is
 * accepted here and a malformed one is simply not found (longer ones are refused: they could not
 * travel in one bus message).
 */
export const MAX_RESOURCE_ID_LENGTH = 4_096;
export const ResourceIdSchema = z.strictObject({ id: z.string().min(1).max(MAX_RESOURCE_ID_LENGTH) });

export function fieldErrors(error: z.ZodError): FieldError[] {
  return error.issues.flatMap((issue) =>
    issue.code === 'unrecognized_keys'
      ? issue.keys.map((key) => ({ field: fieldOf([...issue.path, key]), message: 'unknown field' }))
      : [{ field: fieldOf(issue.path), message: issue.message }],
  );
}

/** Parses `value` with `schema` or throws a `validation_failed` DomainError listing each bad field. */
export function parseOrThrow<S extends z.ZodType>(schema: S, value: unknown, what = 'Request'): z.output<S> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  throw new DomainError(ErrorCode.ValidationFailed, `${what} is invalid`, fieldErrors(result.error));
}

/** How deep a JSON body may nest (an object or array inside another counts one level). */
export const MAX_JSON_DEPTH = 64;

const NUL_REFUSED = 'text must not contain the NUL character (U+0000)';

/**
 * Why a parsed JSON body cannot be accepted, or undefined: nested deeper than MAX_JSON_DEPTH
 * (every later walk, serialisation included, would recurse that deep), or a key or string that
 * holds U+0000 (PostgreSQL stores no NUL in text). Walks with its own stack: no depth a client
 * sends can overflow it.
 */
export function jsonBodyRefusal(value: unknown): FieldError | undefined {
  const pending: Array<{ value: unknown; depth: number }> = [{ value, depth: 1 }];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const current = next.value;
    if (typeof current === 'string') {
      if (current.includes('\u0000')) return { field: 'body', message: NUL_REFUSED };
      continue;
    }
    if (typeof current !== 'object' || current === null) continue;
    if (next.depth > MAX_JSON_DEPTH) return { field: 'body', message: `must not nest deeper than ${MAX_JSON_DEPTH} levels` };
    if (Array.isArray(current)) {
      for (const item of current) pending.push({ value: item, depth: next.depth + 1 });
      continue;
    }
    for (const [key, item] of Object.entries(current)) {
      if (key.includes('\u0000')) return { field: 'body', message: NUL_REFUSED };
      pending.push({ value: item, depth: next.depth + 1 });
    }
  }
  return undefined;
}

/** Size of a value once serialised as JSON, in bytes. */
export function jsonByteLength(value: unknown): number {
  return Buffer.byteLength(JSON.stringify(value) ?? '', 'utf8');
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;

/** Our ids are UUIDs; anything else can be answered "not found" without a lookup. */
export function isUuid(value: unknown): value is string {
  return typeof value === 'string' && UUID.test(value);
}
