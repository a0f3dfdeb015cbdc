import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freeResultName } from './harness';

describe('freeResultName', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'bench-results-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('keeps the files of an earlier run of the day: the name, then -2, -3, …', () => {
    expect(freeResultName(dir, 'missions-2026-11-27')).toBe('missions-2026-11-27');
    writeFileSync(path.join(dir, 'missions-2026-11-27.json'), '{}');
    expect(freeResultName(dir, 'missions-2026-11-27')).toBe('missions-2026-11-27-2');
    // Either file of a pair takes the name.
    writeFileSync(path.join(dir, 'missions-2026-11-27-2.md'), '');
    expect(freeResultName(dir, 'missions-2026-11-27')).toBe('missions-2026-11-27-3');
  });
});
