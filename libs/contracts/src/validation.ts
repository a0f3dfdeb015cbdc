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

/** Size of a value once serialised as JSON, in bytes. */
export function jsonByteLength(value: unknown): number {
  return Buffer.byteLength(JSON.stringify(value) ?? '', 'utf8');
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;

/** Our ids are UUIDs; anything else can be answered "not found" without a lookup. */
export function isUuid(value: unknown): value is string {
  return typeof value === 'string' && UUID.test(value);
}
