import { parseTestPublishedKeys } from './test-published-keys';

const publicKey = { kty: 'EC', crv: 'P-256', x: 'f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU', y: 'x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0', kid: 'test-key' };

describe('test-published keys', () => {
  it('are off unless set', () => {
    expect(parseTestPublishedKeys(undefined, 'production')).toEqual([]);
    expect(parseTestPublishedKeys('', 'test')).toEqual([]);
  });

  it('are honoured in test runs only', () => {
    const raw = JSON.stringify({ keys: [publicKey] });
    expect(parseTestPublishedKeys(raw, 'test')).toEqual([publicKey]);
    for (const environment of [undefined, 'production', 'development']) {
      expect(() => parseTestPublishedKeys(raw, environment)).toThrow(/test suites only/);
    }
  });

  it('refuse anything private or malformed', () => {
    expect(() => parseTestPublishedKeys(JSON.stringify({ keys: [{ ...publicKey, d: 'secret' }] }), 'test')).toThrow(/nothing private/);
    expect(() => parseTestPublishedKeys(JSON.stringify({ keys: [{ kty: 'oct', k: 'abc', kid: 'x' }] }), 'test')).toThrow();
    expect(() => parseTestPublishedKeys('{not json', 'test')).toThrow(/JSON/);
  });
});
