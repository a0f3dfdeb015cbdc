import { z } from 'zod';
import { answer, serialize } from './delivery';
import { checkOnce, immutable, immutableWrapper, isImmutable, jsonOf } from './immutable';

const Reply = z.object({ id: z.string(), tags: z.array(z.string()), nested: z.object({ n: z.number() }) });
const Other = z.object({ id: z.string() });

const value = () => ({ id: 'a', tags: ['x', 'y'], nested: { n: 1 } });

describe('immutable', () => {
  it('freezes a value and everything in it, and marks it', () => {
    const v = immutable(value());
    expect(isImmutable(v)).toBe(true);
    expect(Object.isFrozen(v) && Object.isFrozen(v.tags) && Object.isFrozen(v.nested)).toBe(true);
    expect(() => (v.tags as string[]).push('z')).toThrow(TypeError);
    expect(isImmutable(value())).toBe(false);
    expect(immutable(v)).toBe(v);
    expect(immutable(3)).toBe(3);
    expect(isImmutable(null)).toBe(false);
  });

  it('freezes below a node someone else froze already (a shallow freeze leaves its children open)', () => {
    const inner = { n: 1 };
    const v = immutable({ outer: Object.freeze({ inner }) });
    expect(isImmutable(v)).toBe(true);
    expect(Object.isFrozen(inner)).toBe(true);
  });

  it('marks only plain data: a value holding a Date, a Buffer, a class instance, a bigint or a number JSON cannot write is left unmarked and untouched', () => {
    class Point {
      x = 1;
    }
    for (const odd of [new Date(0), Buffer.from('ab'), new Point(), new Map(), 1n, Number.NaN, Number.POSITIVE_INFINITY, [Number.NEGATIVE_INFINITY]]) {
      const v = { id: 'a', odd };
      expect(immutable(v)).toBe(v);
      expect(isImmutable(v)).toBe(false);
      expect(Object.isFrozen(v)).toBe(false);
    }
    const cyclic: Record<string, unknown> = { id: 'c' };
    cyclic['self'] = cyclic;
    expect(isImmutable(immutable(cyclic))).toBe(true);
    expect(isImmutable(immutable(Object.assign(Object.create(null) as object, { a: [1, null, 'x'] })))).toBe(true);
  });

  it('does not mark a value merely frozen by someone else', () => {
    expect(isImmutable(Object.freeze(value()))).toBe(false);
  });
});

describe('checkOnce', () => {
  it('checks an immutable value that passed unchanged only once per schema, and answers it as it is', () => {
    const parse = jest.spyOn(Reply, 'safeParse');
    const v = immutable(value());
    const first = checkOnce(Reply, v);
    const second = checkOnce(Reply, v);
    expect(first.success && second.success).toBe(true);
    expect(first.data).toBe(v);
    expect(second.data).toBe(v);
    expect(parse).toHaveBeenCalledTimes(1);
    // A pass under one schema says nothing about another.
    const other = jest.spyOn(Other, 'safeParse');
    checkOnce(Other, v);
    expect(other).toHaveBeenCalledTimes(1);
    parse.mockRestore();
    other.mockRestore();
  });

  it('checks a value that may change every time', () => {
    const parse = jest.spyOn(Reply, 'safeParse');
    const v = value();
    checkOnce(Reply, v);
    v.nested.n = 2;
    const again = checkOnce(Reply, v);
    expect(parse).toHaveBeenCalledTimes(2);
    expect(again.success && again.data.nested.n).toBe(2);
    parse.mockRestore();
  });

  it('checks an immutable value every time when the check changes it (a key stripped), answering what the check made', () => {
    const parse = jest.spyOn(Reply, 'safeParse');
    const v = immutable({ ...value(), internal: 'secret' });
    const first = checkOnce(Reply, v);
    const second = checkOnce(Reply, v);
    expect(parse).toHaveBeenCalledTimes(2);
    expect(first.success && second.success).toBe(true);
    expect(second.data).not.toHaveProperty('internal');
    parse.mockRestore();
  });

  it('fails an immutable value that does not match, every time', () => {
    const v = immutable({ id: 1 });
    expect(checkOnce(Reply, v).success).toBe(false);
    expect(checkOnce(Reply, v).success).toBe(false);
  });
});

describe('jsonOf', () => {
  it('encodes an immutable value once, and anything else each time', () => {
    const stringify = jest.spyOn(JSON, 'stringify');
    const v = immutable(value());
    expect(jsonOf(v)).toBe(JSON.stringify(value()));
    stringify.mockClear();
    expect(jsonOf(v)).toBe('{"id":"a","tags":["x","y"],"nested":{"n":1}}');
    expect(stringify).not.toHaveBeenCalled();
    const mutable = value();
    jsonOf(mutable);
    mutable.id = 'b';
    expect(jsonOf(mutable)).toContain('"id":"b"');
    expect(stringify).toHaveBeenCalledTimes(2);
    stringify.mockRestore();
    expect(jsonOf(undefined)).toBeUndefined();
    expect(jsonOf('x')).toBe('"x"');
  });
});

describe('immutableWrapper', () => {
  it('wraps an immutable value in the same immutable wrapper each time, anything else in a new one', () => {
    const cache = new WeakMap<object, { readonly inner: unknown }>();
    const v = immutable(value());
    const first = immutableWrapper(cache, v, () => ({ inner: v }));
    expect(immutableWrapper(cache, v, () => ({ inner: v }))).toBe(first);
    expect(isImmutable(first)).toBe(true);
    const mutable = value();
    expect(immutableWrapper(cache, mutable, () => ({ inner: mutable }))).not.toBe(immutableWrapper(cache, mutable, () => ({ inner: mutable })));
  });
});

describe('a request handler answering an immutable value', () => {
  const logger = { error: jest.fn(), warn: jest.fn(), info: jest.fn() };
  const message = { id: 'm', topic: 't', type: 'x', key: 'k', payload: null, headers: {}, attempt: 1 };
  const scope = <T>(fn: () => Promise<T>): Promise<T> => fn();

  it('answers the same envelope, encoded once; a mutable result gets a fresh one each time', async () => {
    const v = immutable(value());
    const first = await answer(message, async () => v, logger, scope);
    const second = await answer(message, async () => v, logger, scope);
    expect(second).toBe(first);
    expect(first).toEqual({ ok: true, data: v });
    expect(serialize(first)).toBe(JSON.stringify({ ok: true, data: value() }));
    const mutable = value();
    expect(await answer(message, async () => mutable, logger, scope)).not.toBe(await answer(message, async () => mutable, logger, scope));
  });
});
