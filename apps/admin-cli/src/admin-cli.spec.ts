import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { commandToCall, perform, resolveEnvironment, UsageError } from './admin-cli';

describe('admin CLI', () => {
  it('maps each command to its operator API call', () => {
    expect(commandToCall(['tenants', 'create', '--name', 'Acme', '--tier', 'enterprise', '--rpm', '9000'])).toEqual({
      method: 'POST',
      path: '/admin/tenants',
      body: { name: 'Acme', tier: 'enterprise', rpm: 9000 },
    });
    expect(commandToCall(['tenants', 'get', 't1'])).toEqual({ method: 'GET', path: '/admin/tenants/t1' });
    expect(commandToCall(['tenants', 'usage', 't1'])).toEqual({ method: 'GET', path: '/admin/tenants/t1/usage' });
    expect(commandToCall(['tenants', 'update', 't1', '--storage-documents', '500', '--storage-bytes=1048576'])).toEqual({
      method: 'PATCH',
      path: '/admin/tenants/t1',
      body: { storage: { documents: 500, bytes: 1048576 } },
    });
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

  it('never takes a password from the command line, and says how to give it', () => {
    expect(() => commandToCall(['users', 'create', 't', '--username', 'ann', '--password', 'hunter2hunter2'])).toThrow(/--password-stdin/);
  });

  describe('talks only to the configured issuer', () => {
    const environment = { gatewayUrl: 'http://gateway.test', issuer: 'https://login.test', clientId: 'op', clientSecret: 'the-secret' };
    /** A fetch that answers discovery with `metadata`, and records every request after it. */
    function fakeFetch(metadata: Record<string, unknown>): { fetchImpl: typeof fetch; sent: Array<{ url: string; authorization?: string }> } {
      const sent: Array<{ url: string; authorization?: string }> = [];
      const fetchImpl = (async (input: string | URL, init?: RequestInit) => {
        const url = String(input);
        if (url.endsWith('/.well-known/openid-configuration')) return new Response(JSON.stringify(metadata), { status: 200 });
        sent.push({ url, authorization: (init?.headers as Record<string, string> | undefined)?.authorization });
        if (url.includes('/token')) return new Response(JSON.stringify({ access_token: 'at' }), { status: 200 });
        return new Response('{"ok":true}', { status: 200 });
      }) as typeof fetch;
      return { fetchImpl, sent };
    }

    it('sends the secret to the token endpoint of the issuer it was configured with', async () => {
      const { fetchImpl, sent } = fakeFetch({ issuer: 'https://login.test', token_endpoint: 'https://login.test/token' });
      await expect(perform({ method: 'GET', path: '/admin/tenants/t1' }, environment, fetchImpl)).resolves.toMatchObject({ ok: true, status: 200 });
      expect(sent.map((request) => request.url)).toEqual(['https://login.test/token', 'http://gateway.test/admin/tenants/t1']);
    });

    it.each([
      ['another issuer', { issuer: 'https://evil.test', token_endpoint: 'https://login.test/token' }],
      ['no issuer', { token_endpoint: 'https://login.test/token' }],
      ['a token endpoint on another host', { issuer: 'https://login.test', token_endpoint: 'https://evil.test/token' }],
      ['a token endpoint over plain HTTP', { issuer: 'https://login.test', token_endpoint: 'http://login.test/token' }],
      ['a token endpoint that is not a URL', { issuer: 'https://login.test', token_endpoint: 'not a url' }],
    ])('refuses metadata naming %s, before sending anything', async (_case, metadata) => {
      const { fetchImpl, sent } = fakeFetch(metadata);
      await expect(perform({ method: 'GET', path: '/admin/tenants/t1' }, environment, fetchImpl)).rejects.toThrow();
      expect(sent).toEqual([]);
    });
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
    [['users', 'create', 't', '--username', 'ann', '--password', 'p']],
    [['users', 'create', 't', '--username', 'ann', '--password=p']],
    [['users', 'create', 't', '--username', 'ann']],
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
