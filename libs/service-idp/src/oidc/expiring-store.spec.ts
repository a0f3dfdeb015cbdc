import { ExpiringStore } from './expiring-store';

describe('ExpiringStore', () => {
  let now = 0;
  const clock = (): number => now;

  beforeEach(() => {
    now = 1_000_000;
  });

  it('forgets an entry once its time to live has passed', () => {
    const store = new ExpiringStore<string>(10, clock);
    store.set('a', 'value', 60);
    now += 59_999;
    expect(store.get('a')).toBe('value');
    now += 1;
    expect(store.get('a')).toBeUndefined();
  });

  it('keeps at most maxEntries, dropping the least recently written first', () => {
    const store = new ExpiringStore<number>(3, clock);
    for (const [index, key] of ['a', 'b', 'c'].entries()) store.set(key, index);
    store.set('a', 10);
    store.set('d', 3);
    expect(store.size).toBe(3);
    expect(store.get('b')).toBeUndefined();
    expect([store.get('a'), store.get('c'), store.get('d')]).toEqual([10, 2, 3]);
  });

  it('lists live entries by key prefix and prunes expired ones', () => {
    const store = new ExpiringStore<number>(10, clock);
    store.set('Session:1', 1, 10);
    store.set('Session:2', 2);
    store.set('Grant:1', 3);
    now += 10_000;
    expect([...store.entriesWithPrefix('Session:')]).toEqual([['Session:2', 2]]);
    expect(store.size).toBe(2);
  });
});
