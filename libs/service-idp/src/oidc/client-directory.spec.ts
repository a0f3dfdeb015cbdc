import { ClientDirectory } from './client-directory';
import { CONSOLE_CLIENT_ID } from './client-metadata';

describe('ClientDirectory', () => {
  const lookups: string[] = [];
  const repository = {
    findById: async (id: string) => {
      lookups.push(id);
      return null;
    },
  };

  it('registers the console as a public client without a tenant, for its own callback only', async () => {
    const directory = new ClientDirectory(repository, { clientId: 'admin', secretHash: 'h' }, { url: 'https://gw.example/console/' });
    const console = await directory.find(CONSOLE_CLIENT_ID);
    expect(console).toEqual({
      client_id: 'mission-console',
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      redirect_uris: ['https://gw.example/console/callback'],
      post_logout_redirect_uris: ['https://gw.example/console/'],
      token_endpoint_auth_method: 'none',
      scope: 'openid offline_access missions:read hits:read hits:approve',
    });
    expect(console).not.toHaveProperty('client_secret');
    expect(console).not.toHaveProperty('tenant_id');
    expect(lookups).toEqual([]);
  });

  it('knows no console when none is configured', async () => {
    const directory = new ClientDirectory(repository, { clientId: 'admin', secretHash: 'h' });
    await expect(directory.find(CONSOLE_CLIENT_ID)).resolves.toBeUndefined();
    expect(lookups).toEqual([CONSOLE_CLIENT_ID]);
  });
});
