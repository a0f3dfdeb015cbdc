// The compiled modules of tools/register.cjs, on disk, so that a server process does not load swc
// (about 25 MiB resident: its binding and the library it unpacks) nor compile what an earlier
// process compiled. An entry is addressed by a hash of the module's path, its source and
// everything else that decides its code (compilerFingerprint): a changed file, option or swc
// version is another entry, never a stale one. Entries are written to a temporary name and
// renamed, so processes starting together never read half an entry.
//
// Run as a script, it compiles every TypeScript module of the repository's sources that has no
// entry yet (tools/register.cjs runs it in a child process at a process's first miss, the
// Dockerfile at build time) and removes entries not written for 30 days.
const { createHash } = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const { compileTypeScript, compilerFingerprint } = require('./swc-options.cjs');

const root = path.join(__dirname, '..');
const SOURCE_DIRS = ['apps', 'libs', 'bench', 'test', 'tools'];
const SKIPPED_DIRS = new Set(['node_modules', 'dist', '.data', 'tmp']);
const PRUNE_AFTER_MS = 30 * 24 * 60 * 60 * 1000;

/** MISSION_COMPILE_CACHE_DIR, or node_modules/.cache/mission-register (where build tools keep theirs). */
function cacheDir() {
  return process.env.MISSION_COMPILE_CACHE_DIR || path.join(root, 'node_modules', '.cache', 'mission-register');
}

function keyOf(filename, source) {
  return createHash('sha256').update(compilerFingerprint()).update('\0').update(filename).update('\0').update(source).digest('hex');
}

/** The entry for this module's source, or undefined (none, unreadable or not an entry). */
function read(filename, source) {
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
  const file = path.join(dir, `${keyOf(filename, source)}.json`);
  const temporary = `${file}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
  try {
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(temporary, JSON.stringify({ code: entry.code, map: entry.map }));
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

/** Compiles the modules without an entry; returns how many were compiled and written. */
function compileMissing(files = SOURCE_DIRS.flatMap((dir) => typeScriptFiles(path.join(root, dir)))) {
  let compiled = 0;
  let written = 0;
  for (const file of files) {
    const source = fs.readFileSync(file, 'utf8');
    if (read(file, source)) continue;
    let entry;
    try {
      entry = compileTypeScript(source, file);
    } catch {
      continue; // A module that does not compile fails where it is loaded, with swc's message.
    }
    compiled++;
    if (write(file, source, entry)) written++;
  }
  return { compiled, written };
}

function prune(now = Date.now()) {
  const dir = cacheDir();
  let names;
  try {
    names = fs.readdirSync(dir);
  } catch {
    return 0;
  }
  let removed = 0;
  for (const name of names) {
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

module.exports = { cacheDir, compileMissing, keyOf, prune, read, write };

/** Whether entries can be stored: the directory made if need be, and a file written and removed there. */
function writable() {
  const dir = cacheDir();
  const probe = path.join(dir, `.probe.${process.pid}`);
  try {
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(probe, '');
    fs.rmSync(probe);
    return true;
  } catch (error) {
    process.stderr.write(
      `tools/compile-cache.cjs: cannot write ${dir} (${error.code ?? error.message}): each process compiles its TypeScript itself; set MISSION_COMPILE_CACHE_DIR to a writable directory to keep them compiled\n`,
    );
    return false;
  }
}

if (require.main === module && writable()) {
  const { compiled, written } = compileMissing();
  prune();
  if (compiled > written) process.stderr.write(`tools/compile-cache.cjs: ${compiled - written} of ${compiled} compiled modules could not be stored in ${cacheDir()}\n`);
}
