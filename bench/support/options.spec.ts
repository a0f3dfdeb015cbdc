import { parseOptions } from './options';

describe('parseOptions: profiling', () => {
  it('takes --alloc-prof with or without a directory, and a profiled run writes no results unless told to', () => {
    const plain = parseOptions([], {}, 'http');
    const into = parseOptions(['--alloc-prof=/tmp/profiles'], {}, 'http');
    const anywhere = parseOptions(['--alloc-prof'], {}, 'missions');
    const forced = parseOptions(['--alloc-prof', '--write'], {}, 'http');
    if (plain === 'help' || into === 'help' || anywhere === 'help' || forced === 'help') throw new Error('no help asked');
    expect([plain.allocProfDir, plain.write]).toEqual([undefined, true]);
    expect([into.allocProfDir, into.cpuProfDir, into.write]).toEqual(['/tmp/profiles', undefined, false]);
    expect([anywhere.allocProfDir, anywhere.write]).toEqual(['', false]);
    expect(forced.write).toBe(true);
  });

  it('profiles CPU and allocations together when both are asked', () => {
    const both = parseOptions(['--cpu-prof=/tmp/cpu', '--alloc-prof=/tmp/alloc'], {}, 'http');
    if (both === 'help') throw new Error('no help asked');
    expect([both.cpuProfDir, both.allocProfDir, both.write]).toEqual(['/tmp/cpu', '/tmp/alloc', false]);
  });
});
