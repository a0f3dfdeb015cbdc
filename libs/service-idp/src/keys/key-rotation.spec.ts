import { advance, applyChanges, DEFAULT_ROTATION_POLICY, initialKey, KeyTimeline, planRotation, publishedOrder, RotationPolicy } from './key-rotation';

const MINUTE = 60_000;
const policy: RotationPolicy = { publishDelayMs: 10 * MINUTE, retireAfterMs: 61 * MINUTE };

/** A controllable clock and the key table, as the key store would keep them. */
function world(start = Date.parse('2026-01-01T00:00:00Z')) {
  let now = start;
  let keys: KeyTimeline[] = [{ kid: 'k1', ...initialKey(new Date(now)) }];
  let counter = 1;
  return {
    at: () => new Date(now),
    tick: (ms: number) => {
      now += ms;
      keys = applyChanges(keys, advance(keys, new Date(now), policy));
    },
    rotate: () => {
      const plan = planRotation(keys, new Date(now), policy);
      if (plan.ok) keys = [...keys, { kid: `k${++counter}`, ...plan.key }];
      return plan;
    },
    state: () => Object.fromEntries(keys.map((key) => [key.kid, key.state])),
    jwks: () => publishedOrder(keys),
    key: (kid: string) => keys.find((key) => key.kid === kid),
  };
}

describe('signing key rotation', () => {
  it('defaults to the gateway JWKS cache age before signing and token lifetime plus skew before retiring', () => {
    expect(DEFAULT_ROTATION_POLICY).toEqual({ publishDelayMs: 10 * MINUTE, retireAfterMs: 3630 * 1000 });
  });

  it('publishes the new key first, signs with it after the publish delay, retires the old one after its tokens expire', () => {
    const w = world();
    expect(w.jwks()).toEqual(['k1']);

    expect(w.rotate()).toMatchObject({ ok: true, key: { state: 'published', activatesAt: new Date(w.at().getTime() + 10 * MINUTE) } });
    // Published, not signing: k1 stays first (the signing key), k2 is in the JWKS.
    expect(w.state()).toEqual({ k1: 'signing', k2: 'published' });
    expect(w.jwks()).toEqual(['k1', 'k2']);

    w.tick(10 * MINUTE - 1);
    expect(w.state()).toEqual({ k1: 'signing', k2: 'published' });

    w.tick(1);
    expect(w.state()).toEqual({ k1: 'retiring', k2: 'signing' });
    expect(w.jwks()).toEqual(['k2', 'k1']);
    const retiresAt = w.key('k1')?.retiresAt?.getTime();
    expect(retiresAt).toBe(w.at().getTime() + 61 * MINUTE);

    w.tick(61 * MINUTE - 1);
    expect(w.state()).toEqual({ k1: 'retiring', k2: 'signing' });
    expect(w.jwks()).toEqual(['k2', 'k1']);

    w.tick(1);
    expect(w.state()).toEqual({ k1: 'retired', k2: 'signing' });
    expect(w.jwks()).toEqual(['k2']);
  });

  it('counts the retirement from the actual switch when the idp was down past the activation time', () => {
    const w = world();
    w.rotate();
    w.tick(3 * 60 * MINUTE); // nobody advanced the keys for three hours
    expect(w.state()).toEqual({ k1: 'retiring', k2: 'signing' });
    expect(w.key('k1')?.retiresAt?.getTime()).toBe(w.at().getTime() + 61 * MINUTE);
  });

  it('allows one pending rotation at a time', () => {
    const w = world();
    w.rotate();
    expect(w.rotate()).toMatchObject({ ok: false, reason: 'rotation_pending', pendingKid: 'k2' });
    w.tick(10 * MINUTE);
    expect(w.rotate()).toMatchObject({ ok: true });
    expect(w.state()).toEqual({ k1: 'retiring', k2: 'signing', k3: 'published' });
    expect(w.jwks()).toEqual(['k2', 'k3', 'k1']);

    w.tick(10 * MINUTE);
    expect(w.state()).toEqual({ k1: 'retiring', k2: 'retiring', k3: 'signing' });
    expect(w.jwks()).toEqual(['k3', 'k2', 'k1']);
    w.tick(51 * MINUTE);
    expect(w.state()).toEqual({ k1: 'retired', k2: 'retiring', k3: 'signing' });
    w.tick(10 * MINUTE);
    expect(w.state()).toEqual({ k1: 'retired', k2: 'retired', k3: 'signing' });
  });

  it('changes nothing when nothing is due', () => {
    const w = world();
    expect(advance([{ kid: 'k1', ...initialKey(w.at()) }], w.at(), policy)).toEqual([]);
  });
});
