import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { SERVER_NODE_FLAGS } from '../support/processes';

const root = path.join(__dirname, '..', '..');

/** The new space after short-lived garbage has grown it to its limit (2 × the semi-space), in bytes. */
function grownNewSpace(flags: readonly string[]): number {
  const script = `const v8 = require('v8'); let keep = [];
    for (let i = 0; i < 2e6; i++) { keep.push({ i, s: 'x' + i }); if (keep.length > 200000) keep = []; }
    process.stdout.write(String(v8.getHeapSpaceStatistics().find((space) => space.space_name === 'new_space').space_size));`;
  return Number(execFileSync(process.execPath, [...flags, '-e', script], { encoding: 'utf8' }));
}

describe('the Node flags the servers run with', () => {
  it('are the ones `npm start` runs the all-in-one process with', () => {
    const start = (JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts.start;
    expect(start).toContain(`node ${SERVER_NODE_FLAGS.join(' ')} -r ./tools/register.cjs apps/standalone/src/main.ts`);
  });

  it('keep the young generation at 16 MiB semi-spaces on this runtime, where its own default may be larger', () => {
    const flagged = grownNewSpace(SERVER_NODE_FLAGS);
    expect(flagged).toBeGreaterThan(0);
    expect(flagged).toBeLessThanOrEqual(32 * 1024 * 1024);
    // Node 24 on a host with more than a few GiB grows it to 128 MiB; Node 20 stops at 32 MiB either way.
    const unflagged = grownNewSpace([]);
    if (unflagged > 32 * 1024 * 1024) expect(flagged).toBeLessThan(unflagged);
    else expect(flagged).toBe(unflagged);
  });
});
