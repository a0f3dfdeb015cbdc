import { isDeepStrictEqual } from 'node:util';
import type { z } from 'zod';

/**
 * Values that can never change: deep-frozen by `immutable` and remembered here, so work done once
 * on one of them (checking it against a reply schema, encoding it as JSON) holds for every later
 * use. A cache that answers many requests with the same value (a final mission, say) marks it.
 * Weakly held: a value a cache lets go of is collected with what was remembered about it.
 */
interface Known {
  /** Reply schemas this value passed unchanged (what the check made of it equals it). */
  readonly passes: Set<z.ZodType>;
  json?: string;
}

const known = new WeakMap<object, Known>();

/**
 * Freezes `value` and everything it holds, and marks it as never changing; returns it. Only plain
 * data is marked (objects whose prototype is Object's or null, arrays, primitives JSON can write:
 * no bigint, NaN or infinity): a Date, a Buffer or any other instance can change under a freeze,
 * so such a value is returned unmarked and untouched.
 */
export function immutable<T>(value: T): T {
  if (typeof value !== 'object' || value === null || known.has(value)) return value;
  if (!isPlainData(value, new Set())) return value;
  deepFreeze(value, new Set());
  known.set(value, { passes: new Set() });
  return value;
}

export function isImmutable(value: unknown): boolean {
  return typeof value === 'object' && value !== null && known.has(value);
}

function isPlainData(value: unknown, seen: Set<object>): boolean {
  if (typeof value === 'function' || typeof value === 'symbol' || typeof value === 'bigint') return false;
  // JSON has no NaN or infinities (it writes them as null): such a value is not shared as it is.
  if (typeof value === 'number' && !Number.isFinite(value)) return false;
  if (typeof value !== 'object' || value === null) return true;
  if (seen.has(value)) return true;
  seen.add(value);
  const prototype: unknown = Object.getPrototypeOf(value);
  if (!Array.isArray(value) && prototype !== Object.prototype && prototype !== null) return false;
  return Object.values(value).every((child) => isPlainData(child, seen));
}

/** Every node, including one someone else froze already (its children may not be). */
function deepFreeze(value: unknown, seen: Set<object>): void {
  if (typeof value !== 'object' || value === null || seen.has(value)) return;
  seen.add(value);
  Object.freeze(value);
  for (const child of Object.values(value)) deepFreeze(child, seen);
}

/**
 * `schema`'s check of `value`: its output, or the issues. An immutable value that passed once
 * unchanged (no key stripped, no default filled in) is not checked again: it cannot have changed
 * since. Anything else is checked every time.
 */
export function checkOnce<S extends z.ZodType>(schema: S, value: unknown): ReturnType<S['safeParse']> {
  const memo = typeof value === 'object' && value !== null ? known.get(value) : undefined;
  if (memo?.passes.has(schema)) return { success: true, data: value } as ReturnType<S['safeParse']>;
  const result = schema.safeParse(value) as ReturnType<S['safeParse']>;
  if (memo && result.success && isDeepStrictEqual(result.data, value)) {
    memo.passes.add(schema);
    return { success: true, data: value } as ReturnType<S['safeParse']>;
  }
  return result;
}

/** JSON of `value`; an immutable value's is made once and kept with it. */
export function jsonOf(value: unknown): string {
  const memo = typeof value === 'object' && value !== null ? known.get(value) : undefined;
  if (memo?.json !== undefined) return memo.json;
  const json = JSON.stringify(value);
  if (memo) memo.json = json;
  return json;
}

/** The same wrapper around the same immutable value each time (so its JSON, too, is made once). */
export function immutableWrapper<W extends object>(cache: WeakMap<object, W>, value: unknown, wrap: () => W): W {
  if (!isImmutable(value)) return wrap();
  const inner = value as object;
  const existing = cache.get(inner);
  if (existing) return existing;
  const wrapped = immutable(wrap());
  cache.set(inner, wrapped);
  return wrapped;
}
