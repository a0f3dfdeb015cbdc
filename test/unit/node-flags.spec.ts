import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { SERVER_NODE_FLAGS } from '../support/processes';

const root = path.join(__dirname, '..', '..');
const read = (file: string): string => readFileSync(path.join(root, file), 'utf8');

describe('the Node flags the servers run with', () => {
  it('are the same for `npm start`, the container image and the processes tests and benchmarks start', () => {
    const start = (JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts.start;
    expect(start).toContain(`node ${SERVER_NODE_FLAGS.join(' ')} -r ./tools/register.cjs apps/standalone/src/main.ts`);
    expect(read('Dockerfile')).toMatch(new RegExp(`^ENV NODE_OPTIONS=${SERVER_NODE_FLAGS.join(' ')}$`, 'm'));
  });

  it('are not replaced by a NODE_OPTIONS in the manifests or the compose file', () => {
    const manifests = readdirSync(path.join(root, 'k8s'), { recursive: true, encoding: 'utf8' })
      .filter((file) => file.endsWith('.yaml'))
      .map((file) => path.join('k8s', file));
    expect(manifests.length).toBeGreaterThan(5);
    for (const file of [...manifests, 'docker-compose.yml']) expect({ file, setsNodeOptions: read(file).includes('NODE_OPTIONS') }).toEqual({ file, setsNodeOptions: false });
  });

  it('keep the young generation at 16 MiB semi-spaces on this runtime', () => {
    // Short-lived garbage grows the new space to its limit: 2 × the semi-space (Node 24 would
    // reach 128 MiB on a machine with 24 GiB without the flag).
    const script = `const v8 = require('v8'); let keep = [];
      for (let i = 0; i < 2e6; i++) { keep.push({ i, s: 'x' + i }); if (keep.length > 200000) keep = []; }
      process.stdout.write(String(v8.getHeapSpaceStatistics().find((space) => space.space_name === 'new_space').space_size));`;
    const newSpace = Number(execFileSync(process.execPath, [...SERVER_NODE_FLAGS, '-e', script], { encoding: 'utf8' }));
    expect(newSpace).toBeGreaterThan(0);
    expect(newSpace).toBeLessThanOrEqual(32 * 1024 * 1024);
  });
});
