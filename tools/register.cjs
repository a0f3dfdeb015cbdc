// Runs the TypeScript sources directly: each module is compiled by swc (with decorator metadata,
// which NestJS needs, and the @mission/* path aliases rewritten; tools/swc-options.cjs) and kept
// in a cache on disk (tools/compile-cache.cjs). At its first module without an entry a process
// has every module of the repository's sources that lacks one compiled by a child process, so
// swc is loaded into a server only when the cache cannot be written; then it compiles for itself.
//
// @swc-node/register did this before, with the same transform (@swc-node/core). It also loaded
// the TypeScript compiler to read tsconfig.json (about 16 MiB of live heap in every process, 9 MiB
// of it the compiler's source text), kept every module's code and source map in memory for the
// life of the process, and appended each map, the TypeScript source inside, to the code V8 keeps.
// Here a map, without the source, is kept only to turn stack traces back into TypeScript lines;
// it is appended to the code only for Node's own source maps (--enable-source-maps) or a
// debugger attached from the start (--inspect), which binds breakpoints through it.
const { spawnSync } = require('node:child_process');
const inspector = require('node:inspector');
const path = require('node:path');
const { addHook } = require('pirates');
const { SourcemapMap, installSourceMapSupport } = require('@swc-node/sourcemap-support');
const cache = require('./compile-cache.cjs');
const { compileTypeScript } = require('./swc-options.cjs');

const nativeSourceMaps = process.sourceMapsEnabled === true;
const inlineMaps = nativeSourceMaps || inspector.url() !== undefined;
if (!nativeSourceMaps) installSourceMapSupport();

let filledCache = false;

/** Compiles the missing modules in a child process, once per process. */
function fillCache() {
  filledCache = true;
  // Without the parent's preloads (profilers, probes): the child only compiles.
  const env = { ...process.env };
  delete env.NODE_OPTIONS;
  // Bounded: a child that hangs costs this start two minutes at most, then it compiles for itself.
  spawnSync(process.execPath, [path.join(__dirname, 'compile-cache.cjs')], { env, stdio: ['ignore', 'ignore', 'inherit'], timeout: 120_000 });
}

function compiled(source, filename) {
  let entry = cache.read(filename, source);
  if (!entry && !filledCache && cache.trustedDir()) {
    fillCache();
    entry = cache.read(filename, source);
  }
  if (!entry) {
    entry = compileTypeScript(source, filename);
    cache.write(filename, source, entry);
  }
  return entry;
}

addHook(
  (source, filename) => {
    const { code, map } = compiled(source, filename);
    if (!map) return code;
    if (!nativeSourceMaps) SourcemapMap.set(filename, map);
    return inlineMaps ? `${code}\n//# sourceMappingURL=data:application/json;charset=utf-8;base64,${Buffer.from(map, 'utf8').toString('base64')}` : code;
  },
  { exts: ['.ts'], ignoreNodeModules: true },
);
