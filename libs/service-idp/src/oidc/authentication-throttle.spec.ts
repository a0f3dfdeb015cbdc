import { ManualClock, MemoryRateLimiter } from '@mission/rate-limit';
import { AuthenticationThrottle, BUSY, FAILED_AUTHENTICATION_BUDGETS, VerificationGate, VerifiedSecrets } from './authentication-throttle';

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
      expect((await throttle.attempt('client', 'attacked', '10.0.0.1')).allowed).toBe(true);
    }
    const refused = await throttle.attempt('client', 'attacked', '10.0.0.1');
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
    for (let failure = 1; failure <= 51; failure++) expect((await throttle.attempt('client', `client-${failure}`, '10.0.0.7')).allowed).toBe(true);
    expect((await throttle.attempt('client', 'client-52', '10.0.0.7')).allowed).toBe(false);
    expect(throttle.check('client', 'never-failed', '10.0.0.7').allowed).toBe(false);
    expect(throttle.check('client', 'never-failed', '10.0.0.8').allowed).toBe(true);
    // Users: 10 a minute, a burst of 3.
    for (let failure = 1; failure <= 3; failure++) expect((await throttle.attempt('user', 'tenant:ada', undefined)).allowed).toBe(true);
    expect(await throttle.attempt('user', 'tenant:ada', undefined)).toEqual({ allowed: false, retryAfterSeconds: 6 });
    expect(throttle.check('user', 'tenant:ada', undefined).allowed).toBe(false);
    expect(throttle.check('user', 'tenant:grace', undefined).allowed).toBe(true);
  });
});

describe('AuthenticationThrottle.authenticate', () => {
  it('counts guesses sent side by side before any is verified: no more run than the budget allows', async () => {
    const { throttle } = throttleOnClock();
    let verifications = 0;
    const slowWrong = async (): Promise<boolean> => {
      verifications++;
      await new Promise((resolve) => setTimeout(resolve, 20));
      return false;
    };
    // Twenty wrong secrets at once for one client: its burst is six.
    const outcomes = await Promise.all(Array.from({ length: 20 }, (_, i) => throttle.authenticate('client', 'attacked', `10.0.1.${i}`, slowWrong)));
    expect(verifications).toBe(6);
    expect(outcomes.filter((outcome) => outcome.valid === false)).toHaveLength(6);
    expect(outcomes.filter((outcome) => outcome.refused)).toHaveLength(14);
    expect(outcomes.find((outcome) => outcome.refused)?.refused).toEqual({ allowed: false, retryAfterSeconds: 2 });
  });

  it('refuses at once, without verifying, while the process already verifies and queues all it takes', async () => {
    const gate = new VerificationGate(2, 3);
    const throttle = new AuthenticationThrottle(new MemoryRateLimiter({ clock: new ManualClock() }), FAILED_AUTHENTICATION_BUDGETS, () => 0, gate);
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let running = 0;
    let most = 0;
    const verify = async (): Promise<boolean> => {
      running++;
      most = Math.max(most, running);
      await held;
      running--;
      return true;
    };
    // Ten clients, each within its own budget: two verify, three wait, five are refused.
    const pending = Array.from({ length: 10 }, (_, i) => throttle.authenticate('client', `client-${i}`, undefined, verify));
    await new Promise((resolve) => setImmediate(resolve));
    release();
    const outcomes = await Promise.all(pending);
    expect(most).toBe(2);
    expect(outcomes.filter((outcome) => outcome.valid === true)).toHaveLength(5);
    expect(outcomes.filter((outcome) => outcome.refused).map((outcome) => outcome.refused)).toEqual(Array.from({ length: 5 }, () => ({ allowed: false, retryAfterSeconds: 1 })));
  });

  it('refuses a caller that waited its longest in a lane, and lets the next one through after the slot frees', async () => {
    const gate = new VerificationGate(1, 8, 50);
    let release!: () => void;
    const held = gate.run(() => new Promise<boolean>((resolve) => (release = () => resolve(true))));
    await expect(gate.run(async () => true, 'second')).resolves.toBe(BUSY);
    release();
    await expect(held).resolves.toBe(true);
    await expect(gate.run(async () => true, 'second')).resolves.toBe(true);
  });

  it('lets a subject that has not failed lately go ahead of the guesses at ones that have', async () => {
    const gate = new VerificationGate(1, 8);
    const throttle = new AuthenticationThrottle(new MemoryRateLimiter({ clock: new ManualClock() }), FAILED_AUTHENTICATION_BUDGETS, () => 0, gate);
    const order: string[] = [];
    const wrong = (name: string) => async (): Promise<boolean> => {
      order.push(name);
      await new Promise((resolve) => setTimeout(resolve, 5));
      return false;
    };
    await throttle.authenticate('client', 'guessed-a', undefined, wrong('a0'));
    await throttle.authenticate('client', 'guessed-b', undefined, wrong('b0'));
    order.length = 0;
    // A guess is being verified; more guesses at the failed ids queue; then a new client arrives.
    const pending = [
      throttle.authenticate('client', 'guessed-a', undefined, wrong('a1')),
      throttle.authenticate('client', 'guessed-b', undefined, wrong('b1')),
      throttle.authenticate('client', 'guessed-a', undefined, wrong('a2')),
      throttle.authenticate('client', 'new-client', undefined, async () => {
        order.push('new');
        return true;
      }),
    ];
    await Promise.all(pending);
    expect(order).toEqual(['a1', 'new', 'b1', 'a2']);
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
