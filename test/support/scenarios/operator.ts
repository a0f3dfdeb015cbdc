import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { promisify } from 'node:util';
import { call, clientCredentialsToken, jwtClaims as claimsOf } from '../api-client';
import type { ScenarioContext } from '../gateway-scenarios';
import { expectProblem } from '../gateway-scenarios';
import { REPO_ROOT } from '../processes';

const ALL_SCOPES = ['brain:read', 'brain:write', 'hits:approve', 'hits:read', 'missions:read', 'missions:write', 'webhooks:manage'];

/** The rest of the operator API (tenant changes, extra clients, users) and the admin CLI over it. */
export function describeOperatorScenarios(context: ScenarioContext): void {
  const gateway = (): string => context.deployment.gatewayUrl;
  const admin = (method: string, url: string, body?: unknown) => call(gateway(), method, url, { token: context.adminToken, body });

  async function newTenant(body: Record<string, unknown> = { name: 'Provisioned', tier: 'starter' }): Promise<{ id: string; client: { clientId: string; clientSecret: string } }> {
    const created = await admin('POST', '/admin/tenants', body);
    expect(created.status).toBe(201);
    return created.body;
  }

  async function runCli(args: string[], stdin?: string): Promise<{ code: number; stdout: string; stderr: string }> {
    const env = {
      ...process.env,
      GATEWAY_URL: gateway(),
      IDP_ISSUER: context.deployment.issuer,
      ADMIN_CLIENT_ID: context.deployment.admin.clientId,
      ADMIN_CLIENT_SECRET: context.deployment.admin.clientSecret,
    };
    const child = promisify(execFile)(process.execPath, ['-r', './tools/register.cjs', path.join('apps', 'admin-cli', 'src', 'main.ts'), ...args], { cwd: REPO_ROOT, env });
    if (stdin !== undefined) {
      child.child.stdin?.end(stdin);
    }
    try {
      const { stdout, stderr } = await child;
      return { code: 0, stdout, stderr };
    } catch (error) {
      const failed = error as { code?: number; stdout?: string; stderr?: string };
      return { code: failed.code ?? -1, stdout: failed.stdout ?? '', stderr: failed.stderr ?? '' };
    }
  }

  describe('operator API: tenant changes, clients and users', () => {
    it('changes a tenant’s tier and limit with the creation rules, and shows the change', async () => {
      const tenant = await newTenant();
      const toEnterprise = await admin('PATCH', `/admin/tenants/${tenant.id}`, { tier: 'enterprise', rpm: 7_000 });
      expect(toEnterprise.status).toBe(200);
      expect(toEnterprise.body).toMatchObject({ id: tenant.id, tier: 'enterprise', rpm: 7_000 });
      const rpmOnly = await admin('PATCH', `/admin/tenants/${tenant.id}`, { rpm: 8_000 });
      expect(rpmOnly.body).toMatchObject({ tier: 'enterprise', rpm: 8_000 });
      const down = await admin('PATCH', `/admin/tenants/${tenant.id}`, { tier: 'professional' });
      expect(down.body).toMatchObject({ tier: 'professional', rpm: 2_000 });
      expect((await admin('GET', `/admin/tenants/${tenant.id}`)).body).toMatchObject({ tier: 'professional', rpm: 2_000 });

      const needsRpm = await admin('PATCH', `/admin/tenants/${tenant.id}`, { tier: 'enterprise' });
      expectProblem(needsRpm, 400, 'validation_failed');
      expect(needsRpm.body.errors).toEqual([{ field: 'rpm', message: 'rpm is required for the enterprise tier' }]);
      const rpmNotAllowed = await admin('PATCH', `/admin/tenants/${tenant.id}`, { rpm: 10 });
      expect(rpmNotAllowed.body.errors).toEqual([{ field: 'rpm', message: 'rpm can only be set for the enterprise tier' }]);
      const invalid = await admin('PATCH', `/admin/tenants/${tenant.id}`, { tier: 'gold', rpm: 0, name: 'x' });
      expectProblem(invalid, 400, 'validation_failed');
      expect(invalid.body.errors.map((e: { field: string }) => e.field).sort()).toEqual(['name', 'rpm', 'tier']);
      expectProblem(await admin('PATCH', `/admin/tenants/${tenant.id}`, {}), 400, 'validation_failed');
    });

    it('creates extra clients with all seven scopes or a subset, whose tokens carry exactly those scopes', async () => {
      const tenant = await newTenant();
      const all = await admin('POST', `/admin/tenants/${tenant.id}/clients`);
      expect(all.status).toBe(201);
      expect([...all.body.scopes].sort()).toEqual(ALL_SCOPES);
      const narrow = await admin('POST', `/admin/tenants/${tenant.id}/clients`, { scopes: ['missions:read', 'hits:read'] });
      expect(narrow.status).toBe(201);
      expect(narrow.body).toEqual({ clientId: expect.stringMatching(/^cl_/), clientSecret: expect.any(String), scopes: ['missions:read', 'hits:read'] });

      const token = await clientCredentialsToken(context.deployment.issuer, narrow.body.clientId, narrow.body.clientSecret);
      expect(claimsOf(token.access_token)).toMatchObject({ tenant_id: tenant.id, client_id: narrow.body.clientId, scope: 'missions:read hits:read' });
      const write = await call(gateway(), 'POST', '/api/missions', { token: token.access_token, body: { title: 'T', objective: 'O' } });
      expectProblem(write, 403, 'insufficient_scope');
      await expect(clientCredentialsToken(context.deployment.issuer, narrow.body.clientId, narrow.body.clientSecret, 'missions:write')).rejects.toThrow(/invalid_scope/);

      const bad = await admin('POST', `/admin/tenants/${tenant.id}/clients`, { scopes: ['platform:admin', 'missions:read', 'missions:read'], colour: 'red' });
      expectProblem(bad, 400, 'validation_failed');
      expect(bad.body.errors.map((e: { field: string }) => e.field).sort()).toEqual(['colour', 'scopes.0']);
      const repeated = await admin('POST', `/admin/tenants/${tenant.id}/clients`, { scopes: ['missions:read', 'missions:read'] });
      expect(repeated.body.errors).toEqual([{ field: 'scopes', message: 'scopes must not repeat' }]);
      expectProblem(await admin('POST', `/admin/tenants/${tenant.id}/clients`, { scopes: [] }), 400, 'validation_failed');
    });

    it('creates users without ever echoing the password, refuses weak passwords and taken names', async () => {
      const tenant = await newTenant();
      const password = `pw-${randomUUID()}`;
      const created = await admin('POST', `/admin/tenants/${tenant.id}/users`, { username: 'Ada.Lovelace', password, scopes: ['missions:read'] });
      expect(created.status).toBe(201);
      expect(created.body).toEqual({ id: expect.any(String), tenantId: tenant.id, username: 'ada.lovelace', scopes: ['missions:read'], createdAt: expect.any(String) });
      expect(JSON.stringify(created.body)).not.toContain(password);
      const taken = await admin('POST', `/admin/tenants/${tenant.id}/users`, { username: 'ADA.LOVELACE', password });
      expectProblem(taken, 409, 'conflict');
      const elsewhere = await newTenant();
      expect((await admin('POST', `/admin/tenants/${elsewhere.id}/users`, { username: 'ada.lovelace', password })).status).toBe(201);

      const weak = await admin('POST', `/admin/tenants/${tenant.id}/users`, { username: 'bob smith', password: 'short', scopes: ['root'], extra: true });
      expectProblem(weak, 400, 'validation_failed');
      expect(weak.body.errors.map((e: { field: string }) => e.field).sort()).toEqual(['extra', 'password', 'scopes.0', 'username']);
      expect(JSON.stringify(weak.body)).not.toContain('short');
    });

    it('answers 404 for an unknown or malformed tenant on every tenant route', async () => {
      for (const id of [randomUUID(), 'not-a-tenant']) {
        expectProblem(await admin('GET', `/admin/tenants/${id}`), 404, 'not_found');
        expectProblem(await admin('PATCH', `/admin/tenants/${id}`, { tier: 'business' }), 404, 'not_found');
        expectProblem(await admin('POST', `/admin/tenants/${id}/clients`, {}), 404, 'not_found');
        expectProblem(await admin('POST', `/admin/tenants/${id}/users`, { username: 'u', password: 'long enough password' }), 404, 'not_found');
      }
    });

    it('keeps tenant tokens out of every operator route', async () => {
      const { tenantA } = context;
      for (const [method, url, body] of [
        ['PATCH', `/admin/tenants/${tenantA.id}`, { tier: 'enterprise', rpm: 1_000_000 }],
        ['POST', `/admin/tenants/${tenantA.id}/clients`, {}],
        ['POST', `/admin/tenants/${tenantA.id}/users`, { username: 'mallory', password: 'long enough password' }],
        ['GET', `/admin/tenants/${tenantA.id}/usage`, undefined],
      ] as const) {
        expectProblem(await call(gateway(), method, url, { token: tenantA.token, body }), 403, 'insufficient_scope');
      }
    });

    it('drives the same API from the admin CLI, printing JSON', async () => {
      const created = await runCli(['tenants', 'create', '--name', 'From the CLI', '--tier', 'business']);
      expect(created).toMatchObject({ code: 0 });
      const tenant = JSON.parse(created.stdout);
      expect(tenant).toMatchObject({ name: 'From the CLI', tier: 'business', rpm: 500, client: { clientId: expect.any(String) } });

      const updated = await runCli(['tenants', 'update', tenant.id, '--tier', 'enterprise', '--rpm', '4321']);
      expect(JSON.parse(updated.stdout)).toMatchObject({ id: tenant.id, tier: 'enterprise', rpm: 4321 });
      const user = await runCli(['users', 'create', tenant.id, '--username', 'cli-user', '--password-stdin'], 'a password from stdin\n');
      expect(JSON.parse(user.stdout)).toMatchObject({ username: 'cli-user', tenantId: tenant.id });
      const client = await runCli(['clients', 'create', tenant.id, '--scopes', 'brain:read']);
      expect(JSON.parse(client.stdout)).toMatchObject({ scopes: ['brain:read'] });

      const refused = await runCli(['tenants', 'update', tenant.id, '--tier', 'starter', '--rpm', '5']);
      expect(refused.code).toBe(1);
      expect(JSON.parse(refused.stderr)).toMatchObject({ status: 400, code: 'validation_failed', errors: [{ field: 'rpm' }] });
      const usage = await runCli(['tenants', 'remove', tenant.id]);
      expect(usage.code).toBe(2);
    }, 60_000);

    it('quickstart prints shell exports of a new tenant, its client and a working token', async () => {
      const printed = await runCli(['quickstart', '--name', "Quick O'Start"]);
      expect(printed).toMatchObject({ code: 0, stderr: '' });
      // Evaluated by a real shell, as the README does it: every value arrives intact.
      const { stdout } = await promisify(execFile)('sh', ['-c', `${printed.stdout}\nprintf '%s\\n' "$TENANT_ID" "$CLIENT_ID" "$TOKEN"`]);
      const [tenantId, clientId, token] = stdout.trim().split('\n');
      expect(tenantId).toMatch(/^[0-9a-f-]{36}$/);
      expect(clientId).toBeTruthy();
      const submitted = await call(gateway(), 'POST', '/api/missions', { token, body: { title: 'From the quickstart', objective: 'Say hello' } });
      expect(submitted.status).toBe(202);
      const tenant = await admin('GET', `/admin/tenants/${tenantId}`);
      expect(tenant.body).toMatchObject({ name: "Quick O'Start", tier: 'business' });
      expect((await runCli(['quickstart', 'extra'])).code).toBe(2);
    }, 60_000);
  });
}
