import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { call, clientCredentialsToken } from '../support/api-client';
import { DistributedStack, startDistributedStack } from '../support/distributed-stack';
import { kafkaAccessFromEnv } from '../support/kafka-access';

const run = promisify(execFile);

/**
 * The MCP Inspector's command line (installed by the global setup) as a third-party client of
 * /mcp on the separate-process deployment: a scripted tools/list and tools/call with a bearer
 * token, the way the README tells users to connect.
 */
describe('MCP Inspector CLI against /mcp', () => {
  let stack: DistributedStack;
  let token: string;
  const inspector = process.env.MCP_INSPECTOR ?? '';

  async function inspect(...args: string[]): Promise<any> {
    const { stdout } = await run(inspector, ['--cli', `${stack.gatewayUrl}/mcp`, '--transport', 'http', '--header', `Authorization: Bearer ${token}`, ...args], {
      timeout: 60_000,
      env: { ...process.env, NO_COLOR: '1' },
    });
    return JSON.parse(stdout);
  }

  beforeAll(async () => {
    if (!inspector) throw new Error('MCP_INSPECTOR is not set: run through `npm run test:integration`, whose global setup installs it');
    stack = await startDistributedStack(kafkaAccessFromEnv(), process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres');
    const admin = await clientCredentialsToken(stack.issuer, stack.admin.clientId, stack.admin.clientSecret);
    const tenant = await call(stack.gatewayUrl, 'POST', '/admin/tenants', { token: admin.access_token, body: { name: 'Inspector', tier: 'business' } });
    expect(tenant.status).toBe(201);
    token = (await clientCredentialsToken(stack.issuer, tenant.body.client.clientId, tenant.body.client.clientSecret)).access_token;
  }, 180_000);

  afterAll(async () => {
    if (stack) expect(await stack.stop()).toEqual([]);
  }, 60_000);

  it('lists the tools', async () => {
    const listed = await inspect('--method', 'tools/list');
    expect(listed.tools.map((tool: { name: string }) => tool.name)).toEqual(
      expect.arrayContaining(['submit_mission', 'get_mission', 'list_missions', 'query_brain', 'ingest_document', 'list_pending_hits', 'approve_hit', 'reject_hit']),
    );
  });

  it('submits a mission with tools/call, and REST finds it', async () => {
    const result = await inspect('--method', 'tools/call', '--tool-name', 'submit_mission', '--tool-arg', 'title=From the Inspector', '--tool-arg', 'objective=Check the CLI');
    expect(result.isError ?? false).toBe(false);
    expect(result.structuredContent).toMatchObject({ title: 'From the Inspector', status: 'queued' });
    const rest = await call(stack.gatewayUrl, 'GET', `/api/missions/${result.structuredContent.id}`, { token });
    expect(rest.status).toBe(200);
    expect(rest.body.objective).toBe('Check the CLI');
  });

  it('shows an unknown id as a tool error with the problem details, and exits non-zero', async () => {
    const failure = await inspect('--method', 'tools/call', '--tool-name', 'get_mission', '--tool-arg', 'id=no-such-mission').then(
      () => undefined,
      (error: { code?: number; stdout?: string; stderr?: string }) => error,
    );
    expect(failure?.code).not.toBe(0);
    expect(failure?.stderr).toContain('tool_is_error');
    const printed = JSON.parse(failure?.stdout ?? '{}');
    expect(printed).toMatchObject({ isError: true, content: [{ type: 'text' }] });
    expect(printed.structuredContent).toBeUndefined();
    expect(JSON.parse(printed.content[0].text)).toMatchObject({ status: 404, code: 'not_found', instance: '/mcp#get_mission' });
  });
});
