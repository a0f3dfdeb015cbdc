import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { swapKafkajsModule } from './kafkajs-module-swap';

type Double = (value: number) => number;

/**
 * The swap on modules of this test's own (a "shipped" module and one that requires it), so that
 * each way it refuses can be seen leaving the shipped module in place.
 */
describe('swapKafkajsModule', () => {
  let dir: string;
  let serial = 0;
  const shippedSource = 'function double(value) {\n  // twice the value\n  return value * 2;\n}';
  const shippedCompact = 'functiondouble(value){returnvalue*2;}';

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'module-swap-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  /** A fresh pair of modules: `shipped` exports `double`, `user` requires it when loaded. */
  function modules(source = shippedSource): { shipped: string; user: string } {
    serial += 1;
    const shipped = join(dir, `shipped-${serial}.js`);
    const user = join(dir, `user-${serial}.js`);
    writeFileSync(shipped, `module.exports = ${source};\n`);
    writeFileSync(user, `const double = require(${JSON.stringify(shipped)});\nmodule.exports = (value) => double(value);\n`);
    return { shipped, user };
  }

  it('puts the replacement in place for the module loaded later, once, when the source and the sample agree', () => {
    const { shipped, user } = modules();
    const replacement: Double = (value) => value + value;
    const swap = { module: shipped, loadedBy: user, shipped: shippedCompact, replacement: (original: Double) => (original(21) === replacement(21) ? replacement : undefined) };
    expect(swapKafkajsModule(swap)).toBe(true);
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    expect(require(shipped)).toBe(replacement);
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    expect((require(user) as Double)(4)).toBe(8);
    // Asked again (a second client): already in place.
    expect(swapKafkajsModule(swap)).toBe(true);
  });

  it.each([
    ['the replacement disagrees on the sample', shippedSource, (): Double | undefined => undefined],
    [
      'the replacement cannot be built',
      shippedSource,
      (): Double | undefined => {
        throw new Error('no');
      },
    ],
    ['the module ships another function', 'function double(value) { return value << 1; }', (): Double => (value) => value * 2],
    ['the module exports no function', '{ double: 2 }', (): Double => (value) => value * 2],
  ])('leaves the shipped module in place when %s', (_, source, replacement) => {
    const { shipped, user } = modules(source);
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const original = require(shipped) as unknown;
    expect(swapKafkajsModule({ module: shipped, loadedBy: user, shipped: shippedCompact, replacement })).toBe(false);
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    expect(require(shipped)).toBe(original);
  });

  it('is too late once the module that requires the shipped one has loaded', () => {
    const { shipped, user } = modules();
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    require(user);
    const replacement: Double = (value) => value + value;
    expect(swapKafkajsModule({ module: shipped, loadedBy: user, shipped: shippedCompact, replacement: () => replacement })).toBe(false);
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    expect(require(shipped)).not.toBe(replacement);
  });

  it('does nothing for a module that cannot be found', () => {
    const replacement = jest.fn();
    expect(swapKafkajsModule({ module: join(dir, 'missing.js'), loadedBy: join(dir, 'missing-user.js'), shipped: shippedCompact, replacement })).toBe(false);
    expect(replacement).not.toHaveBeenCalled();
  });
});
