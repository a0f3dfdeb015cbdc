import { execFile } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { call, clientCredentialsToken } from '../support/api-client';
import { REPO_ROOT } from '../support/processes';
import { StandaloneProcess, startStandaloneProcess } from '../support/standalone-process';

interface Check {
  readonly id: string;
  readonly status: 'SUCCESS' | 'FAILURE' | 'WARNING' | 'INFO' | string;
  readonly description?: string;
}

/**
 * The official MCP conformance suite's server scenarios that apply to a product server, against
 * `/mcp` of the all-in-one process. The suite sends no credentials, so a small proxy on loopback
 * adds a tenant's token to every request, as an MCP client configured with one would. The
 * warnings of `server-sse-polling` are the ones README's MCP section explains (stateless mode: no
 * session, no resumable POST streams); a new one fails the test so that it gets looked at.
 */
describe('MCP conformance suite against /mcp', () => {
  let standalone: StandaloneProcess;
  let proxy: http.Server;
  let mcpUrl: string;
  let tool: { node: string; entry: string };
  let outputs: string;

  beforeAll(async () => {
    const ensured = await promisify(execFile)(process.execPath, [path.join(REPO_ROOT, 'scripts', 'infra', 'mcp-conformance.mjs'), 'ensure'], { cwd: REPO_ROOT, timeout: 600_000 });
    tool = { entry: /MCP_CONFORMANCE=(\S+)/.exec(ensured.stdout)?.[1] ?? '', node: /NODE_LTS=(\S+)/.exec(ensured.stdout)?.[1] ?? '' };
    expect(tool.entry && tool.node).toBeTruthy();
    standalone = await startStandaloneProcess('mcp-conformance');
    const tenant = await call(standalone.gatewayUrl, 'POST', '/admin/tenants', {
      token: standalone.operatorToken,
      body: { name: 'Conformance', tier: 'enterprise', rpm: 100_000 },
    });
    expect(tenant.status).toBe(201);
    const token = (await clientCredentialsToken(standalone.issuer, tenant.body.client.clientId, tenant.body.client.clientSecret)).access_token;
    const target = new URL(standalone.gatewayUrl);
    proxy = http.createServer((request, response) => {
      const upstream = http.request(
        {
          host: target.hostname,
          port: target.port,
          path: request.url,
          method: request.method,
          headers: { ...request.headers, host: target.host, authorization: `Bearer ${token}` },
        },
        (answer) => {
          response.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(response);
        },
      );
      upstream.on('error', () => response.destroy());
      request.pipe(upstream);
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    mcpUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}/mcp`;
    outputs = await mkdtemp(path.join(os.tmpdir(), 'mcp-conformance-'));
  }, 900_000);

  afterAll(async () => {
    if (proxy) await new Promise((resolve) => proxy.close(resolve));
    if (standalone) expect(await standalone.stop()).toBe(0);
    if (outputs) await rm(outputs, { recursive: true, force: true });
  }, 60_000);

  /** Runs one scenario; resolves with the checks it recorded (its results directory's checks.json). */
  async function scenario(name: string): Promise<Check[]> {
    const dir = path.join(outputs, name);
    await promisify(execFile)(tool.node, [tool.entry, 'server', '--url', mcpUrl, '--scenario', name, '-o', dir], { cwd: REPO_ROOT, timeout: 120_000 }).catch(
      (error: { stdout?: string; stderr?: string }) => {
        throw new Error(`conformance ${name} failed to run:\n${error.stdout ?? ''}${error.stderr ?? ''}`);
      },
    );
    const [results] = await readdir(dir);
    return JSON.parse(await readFile(path.join(dir, results ?? '', 'checks.json'), 'utf8')) as Check[];
  }

  it.each(['server-initialize', 'ping', 'tools-list'])(
    'passes %s',
    async (name) => {
      const checks = await scenario(name);
      expect(checks.filter((check) => check.status === 'SUCCESS').length).toBeGreaterThan(0);
      expect(checks.filter((check) => check.status === 'FAILURE' || check.status === 'WARNING').map((check) => `${check.id}: ${check.description ?? ''}`)).toEqual([]);
    },
    180_000,
  );

  it('passes server-sse-polling with only the warnings of a stateless server', async () => {
    const checks = await scenario('server-sse-polling');
    expect(checks.filter((check) => check.status === 'FAILURE')).toEqual([]);
    expect(
      checks
        .filter((check) => check.status === 'WARNING')
        .map((check) => check.id)
        .sort(),
    ).toEqual(['server-sse-polling-session', 'server-sse-priming-event', 'server-sse-retry-field']);
  }, 180_000);
});
