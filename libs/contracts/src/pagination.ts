import { z } from 'zod';
import { DomainError, ErrorCode } from './errors';

export const PAGE_LIMITS = { min: 1, max: 100, default: 20 } as const;

/** `?limit=&cursor=` of every list endpoint. */
export const PageQuerySchema = z.strictObject({
  limit: z.coerce.number().int().min(PAGE_LIMITS.min).max(PAGE_LIMITS.max).default(PAGE_LIMITS.default),
  cursor: z.string().min(1).max(512).optional(),
});
export type PageQuery = z.output<typeof PageQuerySchema>;

export interface Page<T> {
  readonly items: readonly T[];
  readonly nextCursor: string | null;
}

/** Where a page ends in a keyset ordering: the sort timestamp and the id that breaks ties. */
export interface CursorPosition {
  readonly at: string;
  readonly id: string;
}

/**
 * A cursor's timestamp as this API writes it (`Date.prototype.toISOString`: UTC, milliseconds),
 * of a year PostgreSQL stores: an edited one with year 0 or an offset PostgreSQL refuses would
 * otherwise reach the database and fail there.
 */
const CURSOR_TIMESTAMP = /^(\d{4})-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,3})?Z$/;

function isCursorTimestamp(value: string): boolean {
  const year = Number(CURSOR_TIMESTAMP.exec(value)?.[1] ?? 0);
  return year >= 1 && Number.isFinite(Date.parse(value));
}

const CursorSchema = z.strictObject({ v: z.literal(1), at: z.iso.datetime().refine(isCursorTimestamp), id: z.uuid() });

/**
 * Cursors are opaque to clients (base64url JSON) and safe to tamper with: a decoded cursor is
 * validated strictly and only ever positions a query that is already filtered by the caller's
 * tenant, so an edited cursor can at most move within the caller's own data; a malformed one is 400.
 */
export function encodeCursor(position: CursorPosition): string {
  return Buffer.from(JSON.stringify({ v: 1, at: position.at, id: position.id }), 'utf8').toString('base64url');
}

/** A cursor's content, checked against the schema of its kind; anything else is a 400 naming the cursor. */
function decodeOpaque<S extends z.ZodType>(cursor: string, schema: S): z.output<S> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    parsed = undefined;
  }
  const result = schema.safeParse(parsed);
  if (!result.success) throw new DomainError(ErrorCode.ValidationFailed, 'The cursor is not valid', [{ field: 'cursor', message: 'not a cursor this API issued' }]);
  return result.data;
}

export function decodeCursor(cursor: string): CursorPosition {
  const { at, id } = decodeOpaque(cursor, CursorSchema);
  return { at, id };
}

const SequenceCursorSchema = z.strictObject({ v: z.literal(1), after: z.int().min(0).max(2_147_483_647) });

/** A cursor past position `after` of a sequence (a document's passages by ordinal); opaque and validated like the others. */
export function encodeSequenceCursor(after: number): string {
  return Buffer.from(JSON.stringify({ v: 1, after }), 'utf8').toString('base64url');
}

export function decodeSequenceCursor(cursor: string): number {
  return decodeOpaque(cursor, SequenceCursorSchema).after;
}
