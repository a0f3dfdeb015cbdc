import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { commandToCall, resolveEnvironment, UsageError } from './admin-cli';

describe('admin CLI', () => {
  it('maps each command to its operator API call', () => {
    expect(commandToCall(['tenants', 'create', '--name', 'Acme', '--tier', 'enterprise', '--rpm', '9000'])).toEqual({
      method: 'POST',
      path: '/admin/tenants',
      body: { name: 'Acme', tier: 'enterprise', rpm: 9000 },
    });
    expect(commandToCall(['tenants', 'get', 't1'])).toEqual({ method: 'GET', path: '/admin/tenants/t1' });
    expect(commandToCall(['tenants', 'update', 't1', '--tier=starter'])).toEqual({ method: 'PATCH', path: '/admin/tenants/t1', body: { tier: 'starter' } });
    expect(commandToCall(['clients', 'create', 't1', '--scopes', 'missions:read, hits:read', '--redirect-uri', 'http://a/cb', '--redirect-uri', 'http://b/cb'])).toEqual({
      method: 'POST',
      path: '/admin/tenants/t1/clients',
      body: { scopes: ['missions:read', 'hits:read'], redirectUris: ['http://a/cb', 'http://b/cb'] },
    });
    expect(commandToCall(['users', 'create', 't1', '--username', 'ann', '--password-stdin'])).toEqual({
      method: 'POST',
      path: '/admin/tenants/t1/users',
      body: { username: 'ann' },
      passwordFromStdin: true,
    });
    expect(commandToCall(['keys', 'rotate'])).toEqual({ method: 'POST', path: '/admin/keys/rotate' });
    expect(() => commandToCall(['keys', 'rotate', 'extra'])).toThrow('Unexpected argument for keys rotate: extra');
  });

  it('leaves a non-numeric rpm for the server to refuse with a field error', () => {
    expect(commandToCall(['tenants', 'update', 't1', '--rpm', 'lots']).body).toEqual({ rpm: 'lots' });
  });

  it('escapes the tenant id into the path', () => {
    expect(commandToCall(['tenants', 'get', '../../x?y']).path).toBe('/admin/tenants/..%2F..%2Fx%3Fy');
  });

  it.each([
    [['tenants']],
    [['tenants', 'delete', 'x']],
    [['tenants', 'get']],
    [['tenants', 'get', 'a', 'b']],
    [['tenants', 'create', '--colour', 'red']],
    [['tenants', 'create', '--name']],
    [['users', 'create', 't', '--password', 'p', '--password-stdin']],
  ])('refuses %j as a usage error', (args) => {
    expect(() => commandToCall(args)).toThrow(UsageError);
  });

  it('takes credentials from the environment, else from the data directory, with embedded defaults for the URLs', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'admin-cli-'));
    try {
      await expect(resolveEnvironment({ ADMIN_CLIENT_ID: 'op', ADMIN_CLIENT_SECRET: 's', GATEWAY_URL: 'http://g:1/' }, dir)).resolves.toEqual({
        gatewayUrl: 'http://g:1',
        issuer: 'http://127.0.0.1:3001',
        clientId: 'op',
        clientSecret: 's',
      });
      await expect(resolveEnvironment({}, dir)).rejects.toThrow(UsageError);
      await writeFile(path.join(dir, 'admin-client.json'), JSON.stringify({ clientId: 'cl_admin_x', clientSecret: 'secret' }));
      await expect(resolveEnvironment({ DATA_DIR: dir }, '/')).resolves.toMatchObject({ gatewayUrl: 'http://127.0.0.1:3000', clientId: 'cl_admin_x', clientSecret: 'secret' });
      await expect(resolveEnvironment({ ADMIN_CLIENT_ID: 'only-one' }, dir)).rejects.toThrow(UsageError);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
