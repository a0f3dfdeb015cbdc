import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { call, clientCredentialsToken, eventually, jwtClaims as claimsOf } from '../support/api-client';
import { launchChromium } from '../support/browser';
import { startDistributedStack } from '../support/distributed-stack';
import { kafkaAccessFromEnv } from '../support/kafka-access';
import { startStandaloneProcess } from '../support/standalone-process';

/** What the console test needs of a running platform: both wirings give it. */
interface Platform {
  readonly gatewayUrl: string;
  readonly issuer: string;
  readonly admin: { readonly clientId: string; readonly clientSecret: string };
  stop(): Promise<unknown>;
}

const wirings: Array<[string, () => Promise<Platform>]> = [
  ['embedded (npm start)', () => startStandaloneProcess('console')],
  ['distributed (Kafka)', () => startDistributedStack(kafkaAccessFromEnv(), process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres')],
];

const AXE_SOURCE = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

interface AxeViolation {
  readonly id: string;
  readonly impact?: string | null;
  readonly help: string;
  readonly nodes: ReadonlyArray<{ readonly target: unknown }>;
}

/** axe-core's WCAG 2.x A and AA rules (contrast included) on the page as it is; violations of serious or critical impact. */
async function seriousViolations(page: Page): Promise<string[]> {
  // Evaluated through the DevTools protocol, which the page's Content-Security-Policy does not govern.
  await page.evaluate(AXE_SOURCE);
  const violations = await page.evaluate(async () => {
    const axe = (globalThis as unknown as { axe: { run(context: unknown, options: unknown): Promise<{ violations: AxeViolation[] }> } }).axe;
    const result = await axe.run((globalThis as any).document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'wcag22aa'] } });
    return result.violations.map((violation) => ({
      id: violation.id,
      impact: violation.impact,
      help: violation.help,
      nodes: violation.nodes.map((node) => ({ target: node.target })),
    }));
  });
  return violations
    .filter((violation) => violation.impact === 'serious' || violation.impact === 'critical')
    .map((violation) => `${violation.id}: ${violation.help} ${JSON.stringify(violation.nodes)}`);
}

describe.each(wirings)('The approvals console in a real browser, %s', (_wiring, start) => {
  let platform: Platform;
  let browser: Browser;
  let machineToken: string;
  let tenantName: string;
  let tenantId: string;
  let userId: string;
  let machineClientId: string;
  let otherTenantName: string;
  let otherTenantId: string;
  const password = `pw-${randomBytes(12).toString('base64url')}`;
  const otherPassword = `pw-${randomBytes(12).toString('base64url')}`;

  beforeAll(async () => {
    browser = await launchChromium();
    platform = await start();
    const adminToken = (await clientCredentialsToken(platform.issuer, platform.admin.clientId, platform.admin.clientSecret)).access_token;
    tenantName = `Console tenant ${randomBytes(4).toString('hex')}`;
    const tenant = await call(platform.gatewayUrl, 'POST', '/admin/tenants', { token: adminToken, body: { name: tenantName, tier: 'enterprise', rpm: 100_000 } });
    expect(tenant.status).toBe(201);
    tenantId = tenant.body.id;
    machineToken = (await clientCredentialsToken(platform.issuer, tenant.body.client.clientId, tenant.body.client.clientSecret)).access_token;
    const document = await call(platform.gatewayUrl, 'POST', '/api/brain/documents', {
      token: machineToken,
      body: { title: 'Revenue in the third quarter', content: 'Third quarter revenue rose to 4.2 million, ahead of the plan by six percent.' },
    });
    expect(document.status).toBe(201);
    const user = await call(platform.gatewayUrl, 'POST', `/admin/tenants/${tenantId}/users`, { token: adminToken, body: { username: 'Grace', password } });
    expect(user.status).toBe(201);
    userId = user.body.id;
    machineClientId = tenant.body.client.clientId;
    // A second tenant with a user of the same name.
    otherTenantName = `Other tenant ${randomBytes(4).toString('hex')}`;
    const otherTenant = await call(platform.gatewayUrl, 'POST', '/admin/tenants', { token: adminToken, body: { name: otherTenantName, tier: 'business' } });
    otherTenantId = otherTenant.body.id;
    expect(
      (await call(platform.gatewayUrl, 'POST', `/admin/tenants/${otherTenantId}/users`, { token: adminToken, body: { username: 'grace', password: otherPassword } })).status,
    ).toBe(201);
  }, 240_000);

  afterAll(async () => {
    await browser?.close();
    await platform?.stop();
  }, 120_000);

  async function submitApproval(title: string): Promise<string> {
    const submitted = await call(platform.gatewayUrl, 'POST', '/api/missions', {
      token: machineToken,
      body: {
        title: 'Quarterly report',
        objective: 'Publish the Q3 numbers once someone has checked them',
        steps: [
          { type: 'brain.query', query: 'third quarter revenue' },
          { type: 'approval', title, description: 'Check the figures before they go out.', expiresIn: 3600, assignees: ['grace'] },
        ],
      },
    });
    expect(submitted.status).toBe(202);
    return submitted.body.id;
  }

  async function finalStatus(missionId: string): Promise<any> {
    return eventually(async () => {
      const read = await call(platform.gatewayUrl, 'GET', `/api/missions/${missionId}`, { token: machineToken });
      return ['succeeded', 'rejected', 'failed', 'cancelled'].includes(read.body.status) ? read.body : undefined;
    }, `mission ${missionId} to end`);
  }

  it('signs a user in, shows items the moment they are created, decides them from the keyboard, renews its token silently, and signs out', async () => {
    const context = await browser.newContext({ viewport: { width: 1100, height: 900 } });
    const problems: string[] = [];
    try {
      const page = await context.newPage();
      page.on('console', (message) => {
        if (message.type() === 'error') problems.push(message.text());
      });
      page.on('pageerror', (error) => problems.push(error.message));
      // The page's timers run on a clock the test can move: the token's renewal is due in 59 minutes.
      await page.clock.install();
      await page.goto(`${platform.gatewayUrl}/console/`);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByLabel('Organisation').waitFor();
      expect(await seriousViolations(page)).toEqual([]);
      await page.getByLabel('Organisation').fill(tenantName);
      await page.getByLabel('Username').fill('grace');
      await page.getByLabel('Password').fill(password);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.waitForURL(`${platform.gatewayUrl}/console/`);
      await page.getByText('Live updates on').waitFor();
      await expect(page.getByRole('banner').textContent()).resolves.toContain('Signed in as grace');
      await page.getByText('Nothing is waiting for you').waitFor();

      // An item appears without a reload, with its mission's context.
      const title = `Publish the Q3 report ${randomBytes(3).toString('hex')}`;
      const missionId = await submitApproval(title);
      const item = page.getByRole('article', { name: title });
      await item.waitFor({ timeout: 15_000 });
      // Its mission's context follows the item (one more read).
      await item.getByText(/Revenue in the third quarter/).waitFor();
      await expect(item.textContent()).resolves.toMatch(/Quarterly report[\s\S]*Publish the Q3 numbers[\s\S]*in (59 min|1 h)[\s\S]*Brain query[\s\S]*Revenue in the third quarter/);
      expect(await seriousViolations(page)).toEqual([]);
      if (process.env.CONSOLE_SCREENSHOT) await page.screenshot({ path: path.resolve(process.env.CONSOLE_SCREENSHOT) });

      // Keyboard only: into the comment, type, Tab to Approve, Enter.
      const comment = 'Figures checked against the ledger';
      await item.getByLabel('Comment').focus();
      await page.keyboard.type(comment);
      await page.keyboard.press('Tab');
      await expect(page.evaluate(() => (globalThis as any).document.activeElement?.textContent)).resolves.toBe('Approve');
      await page.keyboard.press('Enter');
      await item.waitFor({ state: 'detached' });
      await page.getByText(`Approved: ${title}`).waitFor({ state: 'attached' });
      const approved = await finalStatus(missionId);
      expect(approved.status).toBe('succeeded');
      expect(approved.steps[1].output).toMatchObject({ decision: 'approved', decidedBy: userId, comment });

      // The missions list shows it as succeeded.
      await page.getByRole('button', { name: 'Missions' }).click();
      await page
        .getByRole('row', { name: /Quarterly report.*Succeeded/ })
        .first()
        .waitFor();
      expect(await seriousViolations(page)).toEqual([]);

      // A minute before the token expires the page renews it with its refresh token (never stored), and goes on working.
      const renewal = page.waitForResponse((response) => response.request().method() === 'POST' && (response.request().postData() ?? '').includes('grant_type=refresh_token'));
      await page.clock.fastForward('59:10');
      expect((await renewal).status()).toBe(200);
      await page.getByRole('button', { name: /Approvals/ }).click();
      const second = `Publish the Q4 report ${randomBytes(3).toString('hex')}`;
      const secondMission = await submitApproval(second);
      const secondItem = page.getByRole('article', { name: second });
      await secondItem.waitFor({ timeout: 15_000 });
      await secondItem.getByRole('button', { name: 'Reject' }).click();
      await secondItem.waitFor({ state: 'detached' });
      expect((await finalStatus(secondMission)).status).toBe('rejected');

      // Nothing the page did was refused by its Content-Security-Policy, and no script failed.
      expect(problems).toEqual([]);

      // Signing out revokes the sign-in and ends the idp's session (after the user confirms there).
      await page.getByRole('button', { name: 'Sign out' }).click();
      await page.getByRole('heading', { name: 'Sign out' }).waitFor();
      await page.getByRole('button', { name: 'Sign out' }).click();
      await page.waitForURL(`${platform.gatewayUrl}/console/`);
      await page.getByText('You are signed out.').waitFor();
      // A link naming the organisation fills it in; the idp asks for the password again (its session ended).
      await page.goto(`${platform.gatewayUrl}/console/?org=${tenantId}`);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByLabel('Password').waitFor();
      await expect(page.getByLabel('Organisation').inputValue()).resolves.toBe(tenantId);
    } finally {
      await context.close();
    }
  }, 180_000);

  it('refuses a wrong organisation, username or password alike, never lends another tenant its user, and always shows the form for a sign-in asked for', async () => {
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      await page.goto(`${platform.gatewayUrl}/console/`);
      await page.getByRole('button', { name: 'Sign in' }).click();
      for (const [organisation, username, pass] of [
        ['No such organisation', 'grace', password],
        [tenantName, 'nobody', password],
        // The other tenant's grace, with her own password, named under this tenant (a wrong password
        // here); and this grace named under the other. Each user's budget holds a burst of 3
        // attempts, and this grace signs in twice in this file: one failure is all she can spare.
        [tenantName, 'grace', otherPassword],
        [otherTenantName, 'grace', password],
      ] as const) {
        await page.getByLabel('Organisation').fill(organisation);
        await page.getByLabel('Username').fill(username);
        await page.getByLabel('Password').fill(pass);
        await page.getByRole('button', { name: 'Sign in' }).click();
        await expect(page.getByRole('alert').textContent()).resolves.toBe('The organisation, username or password is not right.');
        await expect(page.getByLabel('Password').getAttribute('aria-invalid')).resolves.toBe('true');
      }
      // By id (any case) as well as by name; the token is the user's, of the tenant named, with the console's scopes only.
      await page.getByLabel('Organisation').fill(tenantId.toUpperCase());
      await page.getByLabel('Username').fill('grace');
      await page.getByLabel('Password').fill(password);
      const exchange = page.waitForResponse((response) => (response.request().postData() ?? '').includes('grant_type=authorization_code'));
      await page.getByRole('button', { name: 'Sign in' }).click();
      const answer = (await (await exchange).json()) as { access_token: string; scope: string };
      expect(claimsOf(answer.access_token)).toMatchObject({ tenant_id: tenantId, username: 'grace', sub: userId, client_id: 'mission-console', aud: platform.gatewayUrl });
      expect(claimsOf(answer.access_token).scope.split(' ').sort()).toEqual(['hits:approve', 'hits:read', 'missions:read']);
      await page.waitForURL(`${platform.gatewayUrl}/console/`);
      await expect(page.getByRole('banner').textContent()).resolves.toContain('Signed in as grace');

      // Another tab of the same browser: the idp still has a session, yet asking to sign in shows
      // the form, so whoever signs in is who the form names (the other tenant's grace here).
      const other = await context.newPage();
      await other.goto(`${platform.gatewayUrl}/console/`);
      await other.getByRole('button', { name: 'Sign in' }).click();
      await other.getByLabel('Organisation').fill(otherTenantName);
      await other.getByLabel('Username').fill('grace');
      await other.getByLabel('Password').fill(otherPassword);
      const otherExchange = other.waitForResponse((response) => (response.request().postData() ?? '').includes('grant_type=authorization_code'));
      await other.getByRole('button', { name: 'Sign in' }).click();
      expect(claimsOf(((await (await otherExchange).json()) as { access_token: string }).access_token).tenant_id).toBe(otherTenantId);
      await other.getByText('Live updates on').waitFor();
      // The other tenant's console shows none of this tenant's missions.
      await other.getByRole('button', { name: 'Missions' }).click();
      await other.getByText('No missions yet.').waitFor();
    } finally {
      await context.close();
    }
  }, 120_000);

  it('lets only the console’s origin read the token endpoint’s answers, and serves the page with a strict policy', async () => {
    const discovery = (await (await fetch(`${platform.issuer}/.well-known/openid-configuration`)).json()) as Record<string, string>;
    const origin = new URL(platform.gatewayUrl).origin;
    const ask = (from: string) =>
      fetch(discovery.token_endpoint ?? '', {
        method: 'POST',
        headers: { origin: from, 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: 'unknown', client_id: 'mission-console' }),
      });
    expect((await ask(origin)).headers.get('access-control-allow-origin')).toBe(origin);
    expect((await ask('https://elsewhere.example')).headers.get('access-control-allow-origin')).toBeNull();
    // A tenant's own client is not the console's, from the console's origin too.
    const tenantClient = await fetch(discovery.token_endpoint ?? '', {
      method: 'POST',
      headers: { origin, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: 'client_credentials', client_id: machineClientId, client_secret: 'not its secret' }),
    });
    expect(tenantClient.headers.get('access-control-allow-origin')).toBeNull();

    const page = await fetch(`${platform.gatewayUrl}/console/`);
    expect(page.status).toBe(200);
    const policy = page.headers.get('content-security-policy') ?? '';
    expect(policy).toContain("script-src 'self'");
    expect(policy).not.toContain('unsafe-inline');
    expect(policy).toContain("frame-ancestors 'none'");
    expect(await page.text()).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
    // Only the bundle's files are served; nothing else of its directory.
    expect((await fetch(`${platform.gatewayUrl}/console/manifest.json`)).status).toBe(404);
    expect((await fetch(`${platform.gatewayUrl}/console/build-stamp.json`)).status).toBe(404);
  });
});
