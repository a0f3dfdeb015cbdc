import { isDependencyUnavailable } from './unavailable';

const withCode = (code: string, message = 'failed'): Error => Object.assign(new Error(message), { code });

describe('isDependencyUnavailable', () => {
  it.each([
    ['a refused connection', withCode('ECONNREFUSED')],
    ['a reset connection', withCode('ECONNRESET')],
    ['an unresolvable host', withCode('ENOTFOUND')],
    ['a PostgreSQL connection failure (08006)', withCode('08006')],
    ['an administrator shutdown (57P01)', withCode('57P01')],
    ['a database starting up (57P03)', withCode('57P03')],
    ['too many connections (53300)', withCode('53300')],
    ['a pool that could not connect in time', new Error('timeout exceeded when trying to connect')],
    ['a lost connection', new Error('Connection terminated unexpectedly')],
    ['a driver error wrapped by TypeORM', Object.assign(new Error('Query failed'), { driverError: withCode('57P01') })],
    ['a cause', new Error('request failed', { cause: withCode('ETIMEDOUT') })],
  ])('recognises %s', (_what, error) => {
    expect(isDependencyUnavailable(error)).toBe(true);
  });

  it.each([
    ['a unique violation (23505)', withCode('23505')],
    ['a protocol violation (08P01: a wrong number of parameters is a bug)', withCode('08P01', 'bind message supplies 1 parameters, but prepared statement "" requires 2')],
    ['a message that merely mentions a lost connection', new Error('Connection terminated unexpectedly? validate the input')],
    ['a syntax error (42601)', withCode('42601')],
    ['a permission error (42501)', withCode('42501')],
    ['a plain bug', new TypeError('x is undefined')],
    ['a wrapped bug', Object.assign(new Error('Query failed'), { driverError: withCode('22P02') })],
    ['not an error', 'ECONNREFUSED'],
    ['nothing', undefined],
  ])('does not take %s for an outage', (_what, error) => {
    expect(isDependencyUnavailable(error)).toBe(false);
  });
});
