import { readyBlock } from './ready-block';

describe('readyBlock', () => {
  const handle = { gatewayUrl: 'http://127.0.0.1:3000', issuer: 'http://127.0.0.1:3001', opsUrl: 'http://127.0.0.1:3002', dataDir: '/home/ada/mission/.data' };

  it('says where the API, MCP, sign-in, operations and data are, and how to get a token', () => {
    const text = readyBlock(handle, 1_940, '/home/ada/mission');
    expect(text).toContain('Mission Service is ready (1.9 s)');
    expect(text).toContain('http://127.0.0.1:3000/api/docs');
    expect(text).toContain('http://127.0.0.1:3000/mcp');
    expect(text).toContain('Approvals      http://127.0.0.1:3000/console/');
    expect(text).toContain('users create "$TENANT_ID" --username ada --password-stdin');
    expect(text).toContain('echo "Open http://127.0.0.1:3000/console/?org=$TENANT_ID and sign in as ada"');
    expect(text).toContain('Sign-in (idp)  http://127.0.0.1:3001');
    expect(text).toContain('http://127.0.0.1:3002/metrics');
    expect(text).toContain('Data           .data    (operator credentials: .data/admin-client.json)');
    expect(text).toContain('eval "$(npm run -s admin -- quickstart)"');
    expect(text).toContain('Ctrl-C stops everything.');
  });

  it('shows a data directory outside the working directory by its full path', () => {
    const text = readyBlock(handle, 100, '/srv/elsewhere');
    expect(text).toContain('Data           /home/ada/mission/.data');
    // The admin CLI finds the operator's credentials there.
    expect(text).toContain(`eval "$(DATA_DIR='/home/ada/mission/.data' npm run -s admin -- quickstart)"`);
  });
});
