// Builds the approvals console (apps/console) into dist/console with esbuild: one JavaScript
// bundle and one stylesheet, named by their content's hash, and index.html naming them. The same
// sources and lockfile give the same bytes. Prints each file's size, raw and gzipped.
//
//   node tools/console/build.mjs                 build
//   node tools/console/build.mjs --if-stale      build only when the sources changed since the last build
//   node tools/console/build.mjs --out=<dir>     build elsewhere (tests)
//
// Also the `build` target of the `console` Nx project (`npx nx run console:build`).
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const DEFAULT_OUT = path.join(root, 'dist', 'console');
const SOURCES = [path.join(root, 'apps', 'console', 'src'), path.join(root, 'libs', 'ui-look', 'src'), path.join(root, 'libs', 'api-client', 'src')];
const STAMP = 'build-stamp.json';

function filesUnder(directory) {
  return readdirSync(directory, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(directory, entry.name);
    return entry.isDirectory() ? filesUnder(full) : [full];
  });
}

/** A hash of everything the bundle is made of: the sources, the compiler settings, the lockfile and this script. */
export function sourceHash() {
  const hash = createHash('sha256');
  const settings = [
    path.join(root, 'apps', 'console', 'tsconfig.json'),
    path.join(root, 'tsconfig.base.json'),
    path.join(root, 'package-lock.json'),
    fileURLToPath(import.meta.url),
  ];
  const files = [...SOURCES.flatMap(filesUnder).filter((file) => !file.endsWith('.spec.ts')), ...settings].sort();
  for (const file of files) hash.update(path.relative(root, file)).update('\0').update(readFileSync(file)).update('\0');
  return hash.digest('hex');
}

export function isStale(out = DEFAULT_OUT) {
  try {
    const stamp = JSON.parse(readFileSync(path.join(out, STAMP), 'utf8'));
    return stamp.sources !== sourceHash() || !existsSync(path.join(out, 'index.html'));
  } catch {
    return true;
  }
}

function readPreviousFiles(out) {
  try {
    const manifest = JSON.parse(readFileSync(path.join(out, 'manifest.json'), 'utf8'));
    return new Set([manifest.script, manifest.stylesheet].filter((name) => typeof name === 'string'));
  } catch {
    return new Set();
  }
}

/** Builds into `out`; returns the files written with their sizes. */
export async function buildConsole(out = DEFAULT_OUT) {
  const esbuild = await import('esbuild');
  const result = await esbuild.build({
    absWorkingDir: root,
    entryPoints: { console: 'apps/console/src/main.ts' },
    tsconfig: 'apps/console/tsconfig.json',
    bundle: true,
    format: 'esm',
    target: ['es2022', 'chrome111', 'firefox111', 'safari16.4'],
    platform: 'browser',
    minify: true,
    legalComments: 'none',
    entryNames: '[name]-[hash]',
    assetNames: '[name]-[hash]',
    charset: 'utf8',
    write: false,
    outdir: out,
    metafile: true,
    logLevel: 'warning',
  });
  // The previous build's files stay until the next one: a gateway started before this build
  // serves the page that names them until it restarts. Anything older goes.
  const previous = readPreviousFiles(out);
  mkdirSync(out, { recursive: true });
  const current = new Set(result.outputFiles.map((file) => path.basename(file.path)));
  for (const name of readdirSync(out)) {
    if (/\.(js|css)$/.test(name) && !current.has(name) && !previous.has(name)) rmSync(path.join(out, name), { force: true });
  }
  const written = [];
  let js;
  let css;
  for (const file of result.outputFiles) {
    const name = path.basename(file.path);
    writeFileSync(path.join(out, name), file.contents);
    written.push({ name, bytes: file.contents.length, gzip: gzipSync(file.contents, { level: 9 }).length });
    if (name.endsWith('.js')) js = name;
    if (name.endsWith('.css')) css = name;
  }
  if (!js || !css) throw new Error('The console build produced no script or no stylesheet');
  const html = readFileSync(path.join(root, 'apps', 'console', 'src', 'index.html'), 'utf8')
    .replace('%JS%', js)
    .replace('%CSS%', css);
  writeFileSync(path.join(out, 'index.html'), html);
  written.push({ name: 'index.html', bytes: Buffer.byteLength(html), gzip: gzipSync(html, { level: 9 }).length });
  const manifest = { script: js, stylesheet: css, files: written.sort((a, b) => a.name.localeCompare(b.name)) };
  writeFileSync(path.join(out, 'manifest.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  writeFileSync(path.join(out, STAMP), `${JSON.stringify({ sources: sourceHash() })}\n`);
  return manifest;
}

function report(manifest, out) {
  const kb = (bytes) => `${(bytes / 1024).toFixed(1)} KiB`;
  const lines = manifest.files.map((file) => `  ${file.name.padEnd(32)} ${kb(file.bytes).padStart(10)}  gzip ${kb(file.gzip).padStart(9)}`);
  process.stdout.write(`Approvals console built in ${path.relative(process.cwd(), out) || '.'}:\n${lines.join('\n')}\n`);
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const outFlag = process.argv.find((arg) => arg.startsWith('--out='));
  const out = outFlag ? path.resolve(outFlag.slice('--out='.length)) : DEFAULT_OUT;
  if (process.argv.includes('--if-stale') && !isStale(out)) process.exit(0);
  buildConsole(out).then(
    (manifest) => report(manifest, out),
    (error) => {
      process.stderr.write(`The approvals console could not be built: ${error instanceof Error ? error.message : String(error)}\n`);
      process.exit(1);
    },
  );
}
