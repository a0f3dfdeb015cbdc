import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const BUILD = path.join(__dirname, 'build.mjs');
const build = (out: string, ...flags: string[]): string => execFileSync(process.execPath, [BUILD, `--out=${out}`, ...flags], { encoding: 'utf8' });

describe('the approvals console build', () => {
  const dirs: string[] = [];
  const tempDir = (): string => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'console-build-'));
    dirs.push(dir);
    return dir;
  };
  afterAll(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

  it('is reproducible, small (at most 100 KiB of script gzipped), reports its sizes, and loads no inline script', () => {
    const [first, second] = [tempDir(), tempDir()];
    const report = build(first);
    build(second);
    const files = readdirSync(first).sort();
    expect(readdirSync(second).sort()).toEqual(files);
    for (const file of files) expect(readFileSync(path.join(second, file))).toEqual(readFileSync(path.join(first, file)));

    const manifest = JSON.parse(readFileSync(path.join(first, 'manifest.json'), 'utf8')) as { script: string; stylesheet: string; files: Array<{ name: string; gzip: number }> };
    const script = manifest.files.find((file) => file.name === manifest.script);
    expect(script?.gzip).toBeGreaterThan(1_000);
    expect(script?.gzip).toBeLessThanOrEqual(100 * 1024);
    expect(report).toContain(manifest.script);
    expect(report).toMatch(/gzip/);

    const html = readFileSync(path.join(first, 'index.html'), 'utf8');
    expect(html).toContain(`src="./${manifest.script}"`);
    expect(html).toContain(`href="./${manifest.stylesheet}"`);
    expect(html.match(/<script\b[^>]*>/g)).toEqual([`<script type="module" src="./${manifest.script}">`]);
    expect(html).not.toMatch(/\sstyle=|<style/);
  });

  it('builds again only when what it is made of changed (--if-stale)', () => {
    const out = tempDir();
    expect(build(out, '--if-stale')).toContain('Approvals console built');
    expect(build(out, '--if-stale')).toBe('');
    // A stamp of other sources (what a changed file leaves) builds again.
    writeFileSync(path.join(out, 'build-stamp.json'), '{"sources":"of another build"}\n');
    expect(build(out, '--if-stale')).toContain('Approvals console built');
    expect(build(out, '--if-stale')).toBe('');
  });

  it("keeps the previous build's script and stylesheet for a page still naming them, and nothing older", () => {
    const out = tempDir();
    build(out);
    const manifest = JSON.parse(readFileSync(path.join(out, 'manifest.json'), 'utf8')) as { script: string };
    for (const old of ['console-OLDER000.js', 'console-PREVIOUS.js']) writeFileSync(path.join(out, old), '');
    writeFileSync(path.join(out, 'manifest.json'), JSON.stringify({ script: 'console-PREVIOUS.js', stylesheet: 'none.css' }));
    build(out);
    expect(readdirSync(out)).toEqual(expect.arrayContaining([manifest.script, 'console-PREVIOUS.js']));
    expect(readdirSync(out)).not.toContain('console-OLDER000.js');
  });
});
