import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { transformSync } from '@swc-node/core';
import { readDefaultTsConfig, tsCompilerOptionsToSwcConfig } from '@swc-node/register/read-default-tsconfig';
import ts from 'typescript';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const { compileTypeScript, swcOptionsFor } = require('./swc-options.cjs') as {
  compileTypeScript(source: string, filename: string): { code: string; map?: string };
  swcOptionsFor(options: Record<string, unknown>): Record<string, unknown>;
};
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { keyOf, loadableModules, prune, read, typeScriptFiles } = require('./compile-cache.cjs') as {
  keyOf(filename: string, source: string): string;
  typeScriptFiles(dir: string): string[];
  loadableModules(): string[];
  prune(current: Set<string>, now?: number): number;
  read(filename: string, source: string): { code: string } | undefined;
};

const root = path.join(__dirname, '..');

/** What @swc-node/register (the loader tools/register.cjs replaced) makes of a module. */
function throughSwcNodeRegister(source: string, filename: string): string {
  const options = readDefaultTsConfig(path.join(root, 'tsconfig.json'));
  options.module = ts.ModuleKind.CommonJS;
  return transformSync(source, filename, tsCompilerOptionsToSwcConfig(options as ts.CompilerOptions, filename)).code;
}

// Each test compiles hundreds of modules or starts Node processes: seconds on a busy machine.
jest.setTimeout(60_000);

describe('tools/register.cjs', () => {
  it('compiles every module of apps/, libs/, bench/, test/ and tools/ to the code @swc-node/register made', () => {
    const files = ['apps', 'libs', 'bench', 'test', 'tools'].flatMap((dir) => typeScriptFiles(path.join(root, dir)));
    expect(files.length).toBeGreaterThan(300);
    const different = files.filter((file) => {
      const source = readFileSync(file, 'utf8');
      return compileTypeScript(source, file).code !== throughSwcNodeRegister(source, file);
    });
    expect(different.map((file) => path.relative(root, file))).toEqual([]);
  });

  it('rewrites the @mission/* aliases to the libraries and keeps a source map without the source', () => {
    const file = path.join(root, 'libs/service-gateway/src/example.ts');
    const { code, map } = compileTypeScript("import { TIER_RPM } from '@mission/contracts';\nexport const starter: number = TIER_RPM.starter;\n", file);
    expect(code).toContain('require("../../contracts/src")');
    expect(code).not.toContain('sourceMappingURL');
    expect(JSON.parse(map ?? '{}')).toMatchObject({ version: 3, sources: [expect.stringContaining('example.ts')] });
    expect(JSON.parse(map ?? '{}').sourcesContent).toBeUndefined();
  });

  it('refuses a target it cannot read', () => {
    expect(() => swcOptionsFor({ target: 'Latest' })).toThrow(/ES year/);
    expect(swcOptionsFor({ target: 'ES2021' })).toMatchObject({ target: 'es2021', useDefineForClassFields: false });
    expect(swcOptionsFor({ target: 'ESNext' })).toMatchObject({ useDefineForClassFields: true });
  });

  describe('with its compile cache', () => {
    let cacheDir: string;
    let scratch: string;

    beforeEach(() => {
      scratch = mkdtempSync(path.join(tmpdir(), 'register-spec-'));
      cacheDir = path.join(scratch, 'cache');
    });

    afterEach(() => rmSync(scratch, { recursive: true, force: true }));

    function runNode(script: string, env: Record<string, string> = {}): string {
      return execFileSync(process.execPath, ['-r', './tools/register.cjs', '-e', script], {
        cwd: root,
        encoding: 'utf8',
        env: { ...process.env, MISSION_COMPILE_CACHE_DIR: cacheDir, ...env },
      });
    }

    const loadedCompilers = 'Object.keys(require.cache).filter((file) => /node_modules\\/(typescript|@swc\\/core|@swc-node\\/core)\\//.test(file))';

    it('runs modules without loading a compiler into the process, and maps their stack traces to the TypeScript lines', () => {
      const script = [
        "require('./libs/contracts/src/index.ts');",
        "let line = '';",
        "try { require('./tools/testing/throws-at-line-11.ts'); } catch (error) { line = /throws-at-line-11\\.ts:(\\d+)/.exec(error.stack)?.[1] ?? ''; }",
        `console.log(JSON.stringify({ loaded: ${loadedCompilers}, line }));`,
      ].join('\n');
      expect(JSON.parse(runNode(script))).toEqual({ loaded: [], line: '11' });
      const entries = readdirSync(cacheDir);
      // The child compiled every module of the sources, not only the two this process loaded.
      const servers = loadableModules().filter((file) => /^(apps|libs)\//.test(path.relative(root, file)));
      expect(servers.length).toBeGreaterThan(250);
      expect(servers.some((file) => file.endsWith('.spec.ts') || file.includes(`${path.sep}console${path.sep}src${path.sep}`))).toBe(false);
      const previous = process.env.MISSION_COMPILE_CACHE_DIR;
      process.env.MISSION_COMPILE_CACHE_DIR = cacheDir;
      try {
        expect(servers.filter((file) => read(file, readFileSync(file, 'utf8')) === undefined).map((file) => path.relative(root, file))).toEqual([]);
      } finally {
        if (previous === undefined) delete process.env.MISSION_COMPILE_CACHE_DIR;
        else process.env.MISSION_COMPILE_CACHE_DIR = previous;
      }
      const written = entries.map((name) => statSync(path.join(cacheDir, name)).mtimeMs);
      expect(JSON.parse(runNode(script))).toEqual({ loaded: [], line: '11' });
      expect(readdirSync(cacheDir).map((name) => statSync(path.join(cacheDir, name)).mtimeMs)).toEqual(written);
    });

    it('never runs a stale entry: a changed module is compiled again', () => {
      const module = path.join(scratch, 'answer.ts');
      const script = `console.log(require(${JSON.stringify(module)}).answer);`;
      writeFileSync(module, 'export const answer: number = 1;\n');
      expect(runNode(script).trim()).toBe('1');
      writeFileSync(module, 'export const answer: number = 2;\n');
      expect(runNode(script).trim()).toBe('2');
    });

    it('compiles for itself when the cache cannot be written, and reads past an entry that is not one', () => {
      writeFileSync(path.join(scratch, 'file'), '');
      const script = "console.log(require('./libs/contracts/src/index.ts').TIER_RPM.starter);";
      expect(runNode(script, { MISSION_COMPILE_CACHE_DIR: path.join(scratch, 'file', 'cache') }).trim()).toBe('100');
      expect(runNode(script).trim()).toBe('100');
      for (const name of readdirSync(cacheDir)) writeFileSync(path.join(cacheDir, name), '{"code": 4');
      expect(runNode(script).trim()).toBe('100');
    });

    it('runs no entry from a directory another user could write into', () => {
      mkdirSync(cacheDir, { mode: 0o755 });
      chmodSync(cacheDir, 0o777);
      const script = "console.log(require('./libs/contracts/src/index.ts').TIER_RPM.starter);";
      expect(runNode(script).trim()).toBe('100');
      expect(readdirSync(cacheDir)).toEqual([]);
    });

    it('prunes only its own entries of no current module, once they are 30 days old', () => {
      mkdirSync(cacheDir);
      const current = 'a'.repeat(64);
      const gone = 'b'.repeat(64);
      for (const name of [`${current}.json`, `${gone}.json`, 'notes.txt', `${gone}.json.1.x.tmp`]) writeFileSync(path.join(cacheDir, name), '{}');
      writeFileSync(path.join(cacheDir, `${'c'.repeat(64)}.json`), '{}');
      const old = new Date(Date.now() - 31 * 24 * 60 * 60 * 1000);
      for (const name of [`${current}.json`, `${gone}.json`, 'notes.txt', `${gone}.json.1.x.tmp`]) utimesSync(path.join(cacheDir, name), old, old);
      const previous = process.env.MISSION_COMPILE_CACHE_DIR;
      process.env.MISSION_COMPILE_CACHE_DIR = cacheDir;
      try {
        expect(prune(new Set([current]))).toBe(2);
      } finally {
        if (previous === undefined) delete process.env.MISSION_COMPILE_CACHE_DIR;
        else process.env.MISSION_COMPILE_CACHE_DIR = previous;
      }
      expect(readdirSync(cacheDir).sort()).toEqual([`${current}.json`, `${'c'.repeat(64)}.json`, 'notes.txt']);
    });

    it('addresses an entry by the module path and its source', () => {
      const file = path.join(root, 'libs/example.ts');
      const key = keyOf(file, 'export const a = 1;');
      expect(key).toMatch(/^[0-9a-f]{64}$/);
      expect(keyOf(file, 'export const a = 2;')).not.toBe(key);
      expect(keyOf(path.join(root, 'apps/example.ts'), 'export const a = 1;')).not.toBe(key);
      expect(keyOf(file, 'export const a = 1;')).toBe(key);
    });
  });

  it('needs only production dependencies and files the runtime image copies', () => {
    const { dependencies } = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
    const loaderFiles = ['tools/register.cjs', 'tools/compile-cache.cjs', 'tools/swc-options.cjs'];
    const required = loaderFiles.flatMap((file) => [...readFileSync(path.join(root, file), 'utf8').matchAll(/require\('([^']+)'\)/g)].map((match) => match[1]));
    const packages = required.filter((name) => !name.startsWith('.') && !name.startsWith('node:'));
    expect(packages.sort()).toEqual(['@swc-node/core', '@swc-node/sourcemap-support', 'pirates']);
    expect(packages.filter((name) => dependencies[name] === undefined)).toEqual([]);
    expect(dependencies['@swc/core']).toBeDefined();
    const runtimeStage = readFileSync(path.join(root, 'Dockerfile'), 'utf8').split(/^FROM .* AS runtime$/m)[1] ?? '';
    const copied = [...runtimeStage.matchAll(/^COPY (?!--from)(.+) \S+$/gm)].flatMap((match) => match[1].split(/\s+/));
    const localFiles = required.filter((name) => name.startsWith('.')).map((name) => path.relative(root, path.resolve(root, 'tools', name)));
    expect([...new Set(localFiles)].sort()).toEqual(['tools/compile-cache.cjs', 'tools/swc-options.cjs', 'tsconfig.base.json']);
    expect([...new Set([...loaderFiles, ...localFiles])].filter((file) => !copied.includes(file))).toEqual([]);
    // The cache is filled at build time, as root, before the image drops to the node user.
    expect(runtimeStage.indexOf('node tools/compile-cache.cjs --strict')).toBeGreaterThan(runtimeStage.indexOf('COPY apps'));
    expect(runtimeStage.indexOf('node tools/compile-cache.cjs --strict')).toBeLessThan(runtimeStage.indexOf('USER node'));
  });
});
