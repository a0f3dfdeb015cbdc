import { POSTGRES_BACKEND } from './cpu';

describe('POSTGRES_BACKEND', () => {
  it('names the database of a backend over TCP or a Unix socket, and of no background process', () => {
    const database = (title: string): string | undefined => POSTGRES_BACKEND.exec(title)?.[1];
    expect(database('postgres: mission bench_1 127.0.0.1(53124) idle')).toBe('bench_1');
    expect(database('postgres: 15/main: postgres bench_2 127.0.0.1(40000) SELECT')).toBe('bench_2');
    expect(database('postgres: mission mission [local] idle in transaction')).toBe('mission');
    expect(database('postgres: checkpointer')).toBeUndefined();
    expect(database('postgres: autovacuum worker mission')).toBeUndefined();
    expect(database('postgres: 15/main: walwriter')).toBeUndefined();
  });
});
