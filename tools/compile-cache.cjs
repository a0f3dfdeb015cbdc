// The compiled modules of tools/register.cjs, on disk, so that a server process does not load swc
// (about 25 MiB resident: its binding and the library it unpacks) nor compile what an earlier
// process compiled. An entry is addressed by a hash of the module's path, its source and
// everything else that decides its code (compilerFingerprint): a changed file, option or swc
// version is another entry, never a stale one. Entries are written to a temporary name and
// renamed, so processes starting together never read half an entry.
//
// Entries are code the process runs: a directory that another user could write into (owned by
// someone other than this user or root, or writable by group or others) is not used.
//
// Run as a script, it compiles every module of apps/, libs/, bench/, test/ and tools/ that a
// process can load (not the specs jest compiles, nor the browser's apps/console) and has no
// entry yet (tools/register.cjs runs it in a child process at a process's first miss, the
// Dockerfile at build time with --strict: any module that does not compile or cannot be stored
// fails the build), then removes entries of no current module not written for 30 days.
const { createHash } = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const { compileTypeScript, compilerFingerprint } = require('./swc-options.cjs');

const root = path.join(__dirname, '..');
const SOURCE_DIRS = ['apps', 'libs', 'bench', 'test', 'tools'];
const SKIPPED_DIRS = new Set(['node_modules', 'dist', '.data', 'tmp']);
/** Compiled by jest (tools/jest-preset.cjs) or esbuild (tools/console/build.mjs), never through the loader. */
const NOT_LOADED = [/\.(spec|int-spec|e2e-spec)\.ts$/, /^apps\/console\//];
const ENTRY_NAME = /^[0-9a-f]{64}\.json$/;
const LEFTOVER_NAME = /\.(tmp|probe)$/;
const PRUNE_AFTER_MS = 30 * 24 * 60 * 60 * 1000;

/** MISSION_COMPILE_CACHE_DIR, or node_modules/.cache/mission-register (where build tools keep theirs). */
function cacheDir() {
  return process.env.MISSION_COMPILE_CACHE_DIR || path.join(root, 'node_modules', '.cache', 'mission-register');
}

const trusted = new Map();

/**
 * Whether the directory's entries may be run: it does not exist yet (it will be made by this
 * user), or it is owned by this user or root and neither group nor others may write it.
 * Refused once per process with one line.
 */
function trustedDir(dir = cacheDir()) {
  if (trusted.has(dir)) return trusted.get(dir);
  let verdict = true;
  try {
    const stat = fs.statSync(dir);
    const uid = typeof process.getuid === 'function' ? process.getuid() : undefined;
    // Where there are no user ids (Windows) the mode bits say nothing either.
    const shared = uid !== undefined && ((stat.uid !== uid && stat.uid !== 0) || (stat.mode & 0o022) !== 0);
    if (!stat.isDirectory() || shared) {
      verdict = false;
      process.stderr.write(
        `tools/compile-cache.cjs: not using ${dir}: another user could write into it (owner ${stat.uid}, mode ${(stat.mode & 0o777).toString(8)}); each process compiles its TypeScript itself\n`,
      );
    }
  } catch {
    // Not there yet: made by this user when the first entry is written.
  }
  trusted.set(dir, verdict);
  return verdict;
}

function keyOf(filename, source) {
  return createHash('sha256').update(compilerFingerprint()).update('\0').update(filename).update('\0').update(source).digest('hex');
}

/** The entry for this module's source, or undefined (none, unreadable or not an entry). */
function read(filename, source) {
  if (!trustedDir()) return undefined;
  let text;
  try {
    text = fs.readFileSync(path.join(cacheDir(), `${keyOf(filename, source)}.json`), 'utf8');
  } catch {
    return undefined;
  }
  try {
    const entry = JSON.parse(text);
    return typeof entry.code === 'string' && (entry.map === undefined || typeof entry.map === 'string') ? entry : undefined;
  } catch {
    return undefined;
  }
}

/** Stores an entry; false when the directory cannot be written (the entry is then simply not kept). */
function write(filename, source, entry) {
  const dir = cacheDir();
  if (!trustedDir(dir)) return false;
  const file = path.join(dir, `${keyOf(filename, source)}.json`);
  const temporary = `${file}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
  try {
    fs.mkdirSync(dir, { recursive: true, mode: 0o755 });
    fs.writeFileSync(temporary, JSON.stringify({ code: entry.code, map: entry.map }), { mode: 0o644 });
    fs.renameSync(temporary, file);
    return true;
  } catch {
    try {
      fs.rmSync(temporary, { force: true });
    } catch {
      // No directory to hold it: nothing was written.
    }
    return false;
  }
}

function typeScriptFiles(dir) {
  let entries;
  try {
    entries = fs.readdirSync(dir, { withFileTypes: true });
  } catch {
    return [];
  }
  return entries.flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return SKIPPED_DIRS.has(entry.name) ? [] : typeScriptFiles(full);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts') ? [full] : [];
  });
}

/** The modules a process can load through tools/register.cjs. */
function loadableModules() {
  return SOURCE_DIRS.flatMap((dir) => typeScriptFiles(path.join(root, dir))).filter((file) => {
    const relative = path.relative(root, file).split(path.sep).join('/');
    return !NOT_LOADED.some((pattern) => pattern.test(relative));
  });
}

/**
 * Compiles the modules without an entry. Returns the keys of all of them (entries found or
 * written), how many were compiled and written, and those that failed (path and message).
 */
function compileMissing(files = loadableModules()) {
  const keys = new Set();
  const failed = [];
  let compiled = 0;
  let written = 0;
  for (const file of files) {
    let source;
    try {
      source = fs.readFileSync(file, 'utf8');
    } catch {
      continue; // Removed since the directory was read.
    }
    keys.add(keyOf(file, source));
    if (read(file, source)) continue;
    let entry;
    try {
      entry = compileTypeScript(source, file);
    } catch (error) {
      // Fails again where it is loaded, with swc's message; --strict fails the build on it.
      failed.push({ file: path.relative(root, file), message: String(error?.message ?? error).split('\n')[0] });
      continue;
    }
    compiled++;
    if (write(file, source, entry)) written++;
  }
  return { keys, compiled, written, failed };
}

/** Removes entries of none of `current` not written for 30 days, and leftovers of interrupted writes. */
function prune(current, now = Date.now()) {
  const dir = cacheDir();
  let names;
  try {
    names = fs.readdirSync(dir);
  } catch {
    return 0;
  }
  let removed = 0;
  for (const name of names) {
    const ours = (ENTRY_NAME.test(name) && !current.has(name.slice(0, -'.json'.length))) || LEFTOVER_NAME.test(name);
    if (!ours) continue;
    const file = path.join(dir, name);
    try {
      if (now - fs.statSync(file).mtimeMs > PRUNE_AFTER_MS) {
        fs.rmSync(file, { force: true });
        removed++;
      }
    } catch {
      // Gone already (another process pruned it).
    }
  }
  return removed;
}

module.exports = { cacheDir, compileMissing, keyOf, loadableModules, prune, read, trustedDir, typeScriptFiles, write };

/** Whether entries can be stored: the directory made if need be, and a file written and removed there. */
function writable() {
  const dir = cacheDir();
  const probe = path.join(dir, `.${process.pid}.${Math.random().toString(36).slice(2)}.probe`);
  if (!trustedDir(dir)) return false;
  try {
    fs.mkdirSync(dir, { recursive: true, mode: 0o755 });
    fs.writeFileSync(probe, '');
    fs.rmSync(probe, { force: true });
    return true;
  } catch (error) {
    process.stderr.write(
      `tools/compile-cache.cjs: cannot write ${dir} (${error.code ?? error.message}): each process compiles its TypeScript itself; set MISSION_COMPILE_CACHE_DIR to a writable directory to keep them compiled\n`,
    );
    return false;
  }
}

if (require.main === module) {
  const strict = process.argv.includes('--strict');
  if (!writable()) process.exit(strict ? 1 : 0);
  const { keys, compiled, written, failed } = compileMissing();
  prune(keys);
  for (const { file, message } of failed) process.stderr.write(`tools/compile-cache.cjs: ${file} does not compile: ${message}\n`);
  if (compiled > written) process.stderr.write(`tools/compile-cache.cjs: ${compiled - written} of ${compiled} compiled modules could not be stored in ${cacheDir()}\n`);
  if (strict && (failed.length > 0 || compiled > written)) process.exit(1);
}
