/**
 * How our kafkajs fixes take the place of one of its internal modules: through Node's documented
 * module cache, before the kafkajs module that requires it is loaded (kafkajs loads its protocol
 * modules lazily), and only when the module is the one the fix was written for and the fix agrees
 * with it on a sample. Otherwise kafkajs runs as shipped.
 */
export interface KafkajsModuleSwap<F> {
  /** The kafkajs module replaced, e.g. `kafkajs/src/protocol/recordBatch/record/v0`. */
  readonly module: string;
  /** The kafkajs modules that require it once, when they load: too late once one of them is loaded. */
  readonly loadedBy: string | readonly string[];
  /** The shipped module's function, without comments and whitespace. */
  readonly shipped: string;
  /** The replacement, built beside the shipped function; undefined when they disagree on a sample. */
  readonly replacement: (shipped: F) => F | undefined;
}

const installed = new Map<string, unknown>();

function withoutCommentsOrSpace(source: string): string {
  return source.replace(/\/\/[^\n]*/g, '').replace(/\s+/g, '');
}

/** Puts `swap`'s replacement in place; returns whether kafkajs will use it. */
export function swapKafkajsModule<F>(swap: KafkajsModuleSwap<F>): boolean {
  let path: string;
  try {
    path = require.resolve(swap.module);
  } catch {
    return false;
  }
  const mine = installed.get(path);
  if (mine !== undefined && require.cache[path]?.exports === mine) return true;
  try {
    // Already loaded: it holds the module it found then.
    if ((typeof swap.loadedBy === 'string' ? [swap.loadedBy] : swap.loadedBy).some((loader) => require.cache[require.resolve(loader)])) return false;
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const shipped = require(swap.module) as unknown;
    if (typeof shipped !== 'function' || withoutCommentsOrSpace(shipped.toString()) !== swap.shipped) return false;
    const replacement = swap.replacement(shipped as F);
    const module = require.cache[path];
    if (replacement === undefined || !module) return false;
    installed.set(path, replacement);
    // require.cache is Node's documented module cache: the module loaded later gets this.
    module.exports = replacement;
    return true;
  } catch {
    return false;
  }
}
