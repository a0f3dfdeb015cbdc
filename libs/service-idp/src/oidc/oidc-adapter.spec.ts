import type { AdapterPayload } from 'oidc-provider';
import { ClientEntity } from '../clients/client.entity';
import { ClientDirectory } from './client-directory';
import { ExpiringStore } from './expiring-store';
import { createOidcAdapter } from './oidc-adapter';

const TENANT_ID = '3f2504e0-4f89-41d3-9a0c-0305e82c3301';

function setup(): { Adapter: ReturnType<typeof createOidcAdapter>; lookups: string[] } {
  const lookups: string[] = [];
  const stored: ClientEntity = {
    clientId: 'cl_tenant',
    tenantId: TENANT_ID,
    secretHash: 'scrypt$32768$8$1$salt$hash',
    scopes: ['missions:read', 'hits:read'],
    createdAt: new Date(0),
  };
  const repository = {
    findById: async (clientId: string): Promise<ClientEntity | null> => {
      lookups.push(clientId);
      return clientId === stored.clientId ? stored : null;
    },
  };
  const directory = new ClientDirectory(repository, { clientId: 'operator', secretHash: 'scrypt$admin-hash' });
  return { Adapter: createOidcAdapter(directory, new ExpiringStore<AdapterPayload>(100)), lookups };
}

describe('OIDC adapter', () => {
  it('serves the operator client from memory, with platform:admin only and no tenant', async () => {
    const { Adapter, lookups } = setup();
    await expect(new Adapter('Client').find('operator')).resolves.toEqual({
      client_id: 'operator',
      client_secret: 'scrypt$admin-hash',
      grant_types: ['client_credentials'],
      response_types: [],
      token_endpoint_auth_method: 'client_secret_basic',
      scope: 'platform:admin',
    });
    expect(lookups).toEqual([]);
  });

  it('serves tenant clients from the database with their scopes, tenant and secret hash', async () => {
    const { Adapter } = setup();
    await expect(new Adapter('Client').find('cl_tenant')).resolves.toEqual({
      client_id: 'cl_tenant',
      client_secret: 'scrypt$32768$8$1$salt$hash',
      grant_types: ['client_credentials'],
      response_types: [],
      token_endpoint_auth_method: 'client_secret_basic',
      scope: 'missions:read hits:read',
      tenant_id: TENANT_ID,
    });
    await expect(new Adapter('Client').find('cl_unknown')).resolves.toBeUndefined();
  });

  it('refuses to write clients: they are provisioned by the identity service', async () => {
    const { Adapter } = setup();
    const clients = new Adapter('Client');
    await expect(clients.upsert('x', { client_id: 'x' }, 60)).rejects.toThrow('Clients are provisioned');
    await expect(clients.destroy('cl_tenant')).rejects.toThrow('Clients are provisioned');
  });

  it('keeps other models apart by name and hands out copies', async () => {
    const { Adapter } = setup();
    const sessions = new Adapter('Session');
    await sessions.upsert('s1', { uid: 'u1', accountId: 'a' }, 60);
    const found = await sessions.find('s1');
    expect(found).toEqual({ uid: 'u1', accountId: 'a' });
    (found as AdapterPayload).accountId = 'changed';
    await expect(sessions.find('s1')).resolves.toEqual({ uid: 'u1', accountId: 'a' });
    await expect(sessions.findByUid('u1')).resolves.toEqual({ uid: 'u1', accountId: 'a' });
    await expect(new Adapter('Interaction').find('s1')).resolves.toBeUndefined();
  });

  it('marks consumption, destroys, and revokes everything of a grant', async () => {
    const { Adapter } = setup();
    const codes = new Adapter('AuthorizationCode');
    await codes.upsert('c1', { grantId: 'g1' }, 60);
    await codes.upsert('c2', { grantId: 'g1' }, 60);
    await codes.upsert('c3', { grantId: 'g2', userCode: 'ABCD' }, 60);
    await codes.consume('c3');
    expect((await codes.find('c3'))?.consumed).toEqual(expect.any(Number));
    await expect(codes.findByUserCode('ABCD')).resolves.toMatchObject({ grantId: 'g2' });
    await codes.revokeByGrantId('g1');
    await expect(codes.find('c1')).resolves.toBeUndefined();
    await expect(codes.find('c2')).resolves.toBeUndefined();
    await codes.destroy('c3');
    await expect(codes.find('c3')).resolves.toBeUndefined();
  });
});
