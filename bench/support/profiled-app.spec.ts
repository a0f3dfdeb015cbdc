// eslint-disable-next-line @typescript-eslint/no-require-imports
const { profiledApp } = require('./profiled-app.cjs') as { profiledApp(entry?: string): string | undefined };

describe('profiledApp', () => {
  it('names the servers the profilers profile, and nothing else', () => {
    expect(profiledApp('/home/ci/checkout/apps/gateway/src/main.ts')).toBe('gateway');
    expect(profiledApp('C:\\checkout\\apps\\standalone\\src\\main.ts')).toBe('standalone');
    expect(profiledApp('/home/ci/checkout/bench/baseline/main.ts')).toBe('baseline');
    expect(profiledApp('/home/ci/checkout/bench/kafka-floor/responder.ts')).toBe('floor-responder');
    expect(profiledApp('/usr/lib/node_modules/npm/bin/npm-cli.js')).toBeUndefined();
    expect(profiledApp('/home/ci/checkout/bench/run.ts')).toBeUndefined();
    expect(profiledApp('')).toBeUndefined();
  });
});
