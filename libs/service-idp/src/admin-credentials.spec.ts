import { mkdtemp, readFile, rm, stat, writeFile, chmod } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ADMIN_CLIENT_FILE, resolveAdminCredentials } from './admin-credentials';

describe('resolveAdminCredentials', () => {
  let dataDir: string;

  beforeEach(async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), 'idp-admin-'));
  });

  afterEach(async () => {
    await rm(dataDir, { recursive: true, force: true });
  });

  const fileOf = (): string => path.join(dataDir, ADMIN_CLIENT_FILE);

  it('takes both variables from the environment and writes nothing', async () => {
    const env = { ADMIN_CLIENT_ID: 'operator', ADMIN_CLIENT_SECRET: 'a-long-enough-secret' };
    for (const embedded of [true, false]) {
      await expect(resolveAdminCredentials({ env, dataDir, embedded })).resolves.toEqual({
        clientId: 'operator',
        clientSecret: 'a-long-enough-secret',
        generated: false,
      });
    }
    await expect(stat(fileOf())).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('refuses one variable without the other', async () => {
    await expect(resolveAdminCredentials({ env: { ADMIN_CLIENT_ID: 'operator' }, dataDir, embedded: true })).rejects.toThrow(
      'Set both ADMIN_CLIENT_ID and ADMIN_CLIENT_SECRET, or neither',
    );
    await expect(resolveAdminCredentials({ env: { ADMIN_CLIENT_SECRET: 'a-long-enough-secret' }, dataDir, embedded: true })).rejects.toThrow('Set both');
  });

  it('refuses to invent credentials outside the embedded mode', async () => {
    await expect(resolveAdminCredentials({ env: {}, dataDir, embedded: false })).rejects.toThrow('ADMIN_CLIENT_ID and ADMIN_CLIENT_SECRET are required outside the embedded mode');
    await expect(stat(fileOf())).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('generates them once in the embedded mode, in an owner-only file, and reuses them on later starts', async () => {
    const first = await resolveAdminCredentials({ env: { ADMIN_CLIENT_ID: '' }, dataDir, embedded: true });
    expect(first.generated).toBe(true);
    expect(first.clientId).toMatch(/^cl_admin_[0-9a-f]{16}$/);
    expect(Buffer.from(first.clientSecret, 'base64url')).toHaveLength(32);
    expect((await stat(fileOf())).mode & 0o777).toBe(0o600);
    expect(JSON.parse(await readFile(fileOf(), 'utf8'))).toEqual({ clientId: first.clientId, clientSecret: first.clientSecret });

    const second = await resolveAdminCredentials({ env: {}, dataDir, embedded: true });
    expect(second).toEqual({ ...first, generated: false });
  });

  it('agrees on one pair when two processes start together', async () => {
    const results = await Promise.all(Array.from({ length: 5 }, () => resolveAdminCredentials({ env: {}, dataDir, embedded: true })));
    expect(new Set(results.map((r) => r.clientSecret)).size).toBe(1);
    expect(results.filter((r) => r.generated)).toHaveLength(1);
  });

  it('creates a missing data directory owner-only', async () => {
    const nested = path.join(dataDir, 'fresh', 'data');
    await resolveAdminCredentials({ env: {}, dataDir: nested, embedded: true });
    expect((await stat(nested)).mode & 0o777).toBe(0o700);
    expect((await stat(path.join(nested, ADMIN_CLIENT_FILE))).mode & 0o777).toBe(0o600);
  });

  it('tightens a file left readable by others', async () => {
    const first = await resolveAdminCredentials({ env: {}, dataDir, embedded: true });
    await chmod(fileOf(), 0o644);
    await expect(resolveAdminCredentials({ env: {}, dataDir, embedded: true })).resolves.toEqual({ ...first, generated: false });
    expect((await stat(fileOf())).mode & 0o777).toBe(0o600);
  });

  it('names the file when its content is unusable instead of replacing it', async () => {
    await writeFile(fileOf(), '{"clientId": "x"}', { mode: 0o600 });
    await expect(resolveAdminCredentials({ env: {}, dataDir, embedded: true })).rejects.toThrow(`${fileOf()} is not a valid secret file`);
  });
});
