import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { cp, mkdir, mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { freePort } from '@mission/persistence';
import { REPO_ROOT, RunningProcess, startProcess, waitUntilReady } from '../support/processes';

const asRoot = process.getuid?.() === 0;

/**
 * `npm start` from a checkout in a directory other users cannot enter (anything under root's
 * home, a `mktemp -d`), as containers and CI runners often have it. As root, PostgreSQL runs as
 * the `postgres` user, which cannot reach the checkout's binaries or data directory: the start
 * must still work, and say where it keeps what it had to keep elsewhere.
 */
describe(`npm start from a private checkout (${asRoot ? 'as root' : 'as an ordinary user'})`, () => {
  let root: string;
  let checkout: string;
  let standalone: RunningProcess | undefined;
  let relocatedCluster: string | undefined;

  beforeAll(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), 'mission-private-'));
    checkout = path.join(root, 'checkout');
    // The working tree as it is (tracked and new files), and node_modules as hard links.
    const files = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: REPO_ROOT }).toString('utf8').split('\0').filter(Boolean);
    for (const file of files) {
      if (!existsSync(path.join(REPO_ROOT, file))) continue;
      await mkdir(path.dirname(path.join(checkout, file)), { recursive: true });
      await cp(path.join(REPO_ROOT, file), path.join(checkout, file), { verbatimSymlinks: true });
    }
    execFileSync('cp', ['-al', path.join(REPO_ROOT, 'node_modules'), path.join(checkout, 'node_modules')]);
  }, 120_000);

  afterAll(async () => {
    await standalone?.stop();
    if (relocatedCluster?.startsWith('/var/lib/mission-service/clusters/')) await rm(relocatedCluster, { recursive: true, force: true });
    await rm(root, { recursive: true, force: true });
  });

  it('starts, serves and stops with its data in the checkout’s .data', async () => {
    expect((await stat(root)).mode & 0o777).toBe(0o700);
    const [port, idpPort, opsPort] = [await freePort(), await freePort(), await freePort()];
    // A newcomer's environment: none of the test run's brokers, databases or data directories.
    const basics = Object.fromEntries(['PATH', 'HOME', 'LANG', 'TMPDIR'].flatMap((name) => (process.env[name] ? [[name, process.env[name] as string]] : [])));
    standalone = startProcess(
      'private-checkout',
      'apps/standalone/src/main.ts',
      { ...basics, PORT: String(port), IDP_PORT: String(idpPort), OPS_PORT: String(opsPort), LOG_LEVEL: 'info' },
      { cwd: checkout, inheritEnv: false },
    );
    await waitUntilReady(`http://127.0.0.1:${port}/health/ready`, [standalone], 120_000);
    const document = await fetch(`http://127.0.0.1:${port}/api/openapi.json`);
    expect(document.status).toBe(200);

    const dataDir = path.join(checkout, '.data');
    const location = path.join(dataDir, 'postgres.location');
    if (asRoot) {
      // The postgres user cannot enter the checkout: the cluster lives where it can, and the data directory says where.
      relocatedCluster = (await readFile(location, 'utf8')).trim();
      expect(relocatedCluster).toMatch(/^\/var\/lib\/mission-service\/clusters\/[0-9a-f]{24}$/);
      expect(existsSync(path.join(relocatedCluster, 'PG_VERSION'))).toBe(true);
      expect(standalone.output()).toContain(`its cluster is kept in ${relocatedCluster}`);
    } else {
      expect(existsSync(location)).toBe(false);
      expect(existsSync(path.join(dataDir, 'postgres', 'PG_VERSION'))).toBe(true);
    }

    const code = await standalone.stop();
    standalone = undefined;
    expect(code).toBe(0);
    // PostgreSQL went with it: nothing listens on the cluster any more (its pid file is removed on a clean stop).
    const cluster = relocatedCluster ?? path.join(dataDir, 'postgres');
    expect(existsSync(path.join(cluster, 'postmaster.pid'))).toBe(false);
  }, 240_000);
});
