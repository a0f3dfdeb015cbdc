// Runs the TypeScript sources directly: swc compiles each module as it is loaded (with decorator
// metadata, which NestJS needs) and rewrites the @mission/* path aliases (tools/swc-options.cjs).
//
// @swc-node/register did this before, with the same transform (@swc-node/core). It also loaded
// the TypeScript compiler to read tsconfig.json (about 16 MiB of live heap in every process, 9 MiB
// of it the compiler's source text), kept every module's code and source map in a cache for the
// life of the process, and appended each map, the TypeScript source inside, to the code V8 keeps.
// Here a map, without the source, is kept only to turn stack traces back into TypeScript lines;
// it is appended to the code only for Node's own source maps (--enable-source-maps) or a
// debugger attached from the start (--inspect), which binds breakpoints through it.
const inspector = require('node:inspector');
const { addHook } = require('pirates');
const { SourcemapMap, installSourceMapSupport } = require('@swc-node/sourcemap-support');
const { compileTypeScript } = require('./swc-options.cjs');

const nativeSourceMaps = process.sourceMapsEnabled === true;
const inlineMaps = nativeSourceMaps || inspector.url() !== undefined;
if (!nativeSourceMaps) installSourceMapSupport();

addHook(
  (source, filename) => {
    const { code, map } = compileTypeScript(source, filename);
    if (!map) return code;
    if (!nativeSourceMaps) SourcemapMap.set(filename, map);
    return inlineMaps ? `${code}\n//# sourceMappingURL=data:application/json;charset=utf-8;base64,${Buffer.from(map, 'utf8').toString('base64')}` : code;
  },
  { exts: ['.ts'], ignoreNodeModules: true },
);
