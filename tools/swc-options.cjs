// How tools/register.cjs compiles a TypeScript module: the options @swc-node/register derives
// from tsconfig's compiler options, derived here from tsconfig.base.json without loading the
// TypeScript compiler (as tools/jest-preset.cjs reads it). swc itself is loaded only when a module
// is compiled. No side effects: tools/register.spec.ts loads it to compare every module's output
// with @swc-node/register's.
const { createHash } = require('node:crypto');
const { readFileSync } = require('node:fs');
const path = require('node:path');

const root = path.join(__dirname, '..');

/** ES year of a tsconfig target ("ES2022" → 2022; "ESNext" counts as the newest). */
function targetYear(target) {
  if (/^esnext$/i.test(target)) return Number.POSITIVE_INFINITY;
  const year = /^es(\d{4})$/i.exec(target ?? '');
  if (!year) throw new Error(`Unsupported compilerOptions.target ${JSON.stringify(target)} in tsconfig.base.json: give an ES year (ES2022) or ESNext`);
  return Number(year[1]);
}

/** @swc-node/core options for tsconfig compiler options; modules are always CommonJS, as @swc-node/register makes them. */
function swcOptionsFor(options) {
  const baseUrl = path.resolve(root, options.baseUrl ?? '.');
  return {
    module: 'commonjs',
    target: options.target.toLowerCase(),
    jsx: false,
    sourcemap: true,
    experimentalDecorators: options.experimentalDecorators ?? false,
    emitDecoratorMetadata: options.emitDecoratorMetadata ?? false,
    // TypeScript's default: define semantics from ES2022 on.
    useDefineForClassFields: options.useDefineForClassFields ?? targetYear(options.target) >= 2022,
    esModuleInterop: options.esModuleInterop ?? false,
    dynamicImport: true,
    keepClassNames: true,
    externalHelpers: Boolean(options.importHelpers),
    baseUrl,
    paths: Object.fromEntries(Object.entries(options.paths ?? {}).map(([alias, targets]) => [alias, targets.map((target) => path.resolve(baseUrl, target))])),
    ignoreDynamic: false,
    // A map only places stack frames: it needs no copy of the source.
    swc: { inlineSourcesContent: false },
  };
}

const swcOptions = swcOptionsFor(require('../tsconfig.base.json').compilerOptions);

/** One module's JavaScript and source map (JSON text). */
function compileTypeScript(source, filename) {
  const { transformSync } = require('@swc-node/core');
  // @swc-node/core writes defaults into the options it is given: a copy each time.
  const { code, map } = transformSync(source, filename, { ...swcOptions });
  return { code, map };
}

let fingerprint;

/**
 * What else decides a module's compiled code besides its source and path: the options, the
 * versions of swc and its wrapper, and this file. Part of every compile cache key.
 */
function compilerFingerprint() {
  const versionOf = (name) => JSON.parse(readFileSync(require.resolve(`${name}/package.json`), 'utf8')).version;
  fingerprint ??= createHash('sha256')
    .update(JSON.stringify([swcOptions, versionOf('@swc/core'), versionOf('@swc-node/core')]))
    .update(readFileSync(__filename))
    .digest('hex');
  return fingerprint;
}

module.exports = { compileTypeScript, compilerFingerprint, swcOptionsFor };
