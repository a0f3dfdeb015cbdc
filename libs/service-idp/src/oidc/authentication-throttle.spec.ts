import { ManualClock, MemoryRateLimiter } from '@mission/rate-limit';
import { AuthenticationThrottle, FAILED_AUTHENTICATION_BUDGETS, VerifiedSecrets } from './authentication-throttle';

function throttleOnClock(): { throttle: AuthenticationThrottle; advance(seconds: number): void } {
  const clock = new ManualClock();
  let wall = 1_000_000;
  const throttle = new AuthenticationThrottle(new MemoryRateLimiter({ clock }), FAILED_AUTHENTICATION_BUDGETS, () => wall);
  return {
    throttle,
    advance: (seconds) => {
      clock.advanceSeconds(seconds);
      wall += seconds * 1000;
    },
  };
}

describe('AuthenticationThrottle', () => {
  it('refuses a client after the burst of failures its budget allows, for as long as the bucket takes, and others not at all', async () => {
    const { throttle, advance } = throttleOnClock();
    // 30 a minute: a burst of ⌈30/6⌉ + 1 = 6 failures, then one every 2 s.
    for (let failure = 1; failure <= 6; failure++) {
      expect(throttle.check('client', 'attacked', '10.0.0.1').allowed).toBe(true);
      expect((await throttle.failed('client', 'attacked', '10.0.0.1')).allowed).toBe(true);
    }
    const refused = await throttle.failed('client', 'attacked', '10.0.0.1');
    expect(refused).toEqual({ allowed: false, retryAfterSeconds: 2 });
    expect(throttle.check('client', 'attacked', '10.0.0.2')).toEqual({ allowed: false, retryAfterSeconds: 2 });
    // Another client from another address is untouched.
    expect(throttle.check('client', 'bystander', '10.0.0.9').allowed).toBe(true);
    advance(2);
    expect(throttle.check('client', 'attacked', '10.0.0.2').allowed).toBe(true);
  });

  it('refuses a source that fails for many subjects, and a user after three failed sign-ins', async () => {
    const { throttle } = throttleOnClock();
    // 300 a minute: a burst of 51 failures from one address, whatever the client ids.
    for (let failure = 1; failure <= 51; failure++) expect((await throttle.failed('client', `client-${failure}`, '10.0.0.7')).allowed).toBe(true);
    expect((await throttle.failed('client', 'client-52', '10.0.0.7')).allowed).toBe(false);
    expect(throttle.check('client', 'never-failed', '10.0.0.7').allowed).toBe(false);
    expect(throttle.check('client', 'never-failed', '10.0.0.8').allowed).toBe(true);
    // Users: 10 a minute, a burst of 3.
    for (let failure = 1; failure <= 3; failure++) expect((await throttle.failed('user', 'tenant:ada', undefined)).allowed).toBe(true);
    expect(await throttle.failed('user', 'tenant:ada', undefined)).toEqual({ allowed: false, retryAfterSeconds: 6 });
    expect(throttle.check('user', 'tenant:ada', undefined).allowed).toBe(false);
    expect(throttle.check('user', 'tenant:grace', undefined).allowed).toBe(true);
  });
});

describe('VerifiedSecrets', () => {
  it('remembers a verified secret while it is used, per client and stored hash, and never holds the secret', () => {
    let now = 0;
    const verified = new VerifiedSecrets(60_000, 10, () => now);
    verified.remember('client-a', 'hash-1', 's3cret-value');
    expect(verified.has('client-a', 'hash-1', 's3cret-value')).toBe(true);
    expect(verified.has('client-a', 'hash-1', 'another')).toBe(false);
    expect(verified.has('client-b', 'hash-1', 's3cret-value')).toBe(false);
    // A rotated secret has another stored hash: the old one is not remembered for it.
    expect(verified.has('client-a', 'hash-2', 's3cret-value')).toBe(false);
    expect(JSON.stringify([...(verified as unknown as { verified: Map<string, number> }).verified.keys()])).not.toContain('s3cret');
    // Each use extends it; unused for its whole life, it is gone.
    now = 50_000;
    expect(verified.has('client-a', 'hash-1', 's3cret-value')).toBe(true);
    now = 100_000;
    expect(verified.has('client-a', 'hash-1', 's3cret-value')).toBe(true);
    now = 160_001;
    expect(verified.has('client-a', 'hash-1', 's3cret-value')).toBe(false);
  });
});
