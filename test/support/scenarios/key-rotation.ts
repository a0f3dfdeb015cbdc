import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { call, clientCredentialsToken, eventually, politeCall } from '../api-client';
import type { ScenarioContext } from '../gateway-scenarios';
import { expectProblem } from '../gateway-scenarios';
import { REPO_ROOT } from '../processes';

function kidOf(jwt: string): string {
  return String(JSON.parse(Buffer.from(jwt.split('.')[0] ?? '', 'base64url').toString('utf8')).kid);
}

/**
 * Signing key rotation through the admin CLI (deployments under test use a publish delay of a few
 * seconds): the new key is published at once, signs after the delay, and tokens signed before stay valid.
 */
export function describeKeyRotationScenarios(context: ScenarioContext): void {
  describe('signing key rotation', () => {
    it('publishes the new key before it signs, keeps earlier tokens valid and signs new tokens with it', async () => {
      const { deployment, tenantA } = context;
      const newToken = async (): Promise<string> => (await clientCredentialsToken(deployment.issuer, tenantA.clientId, tenantA.clientSecret)).access_token;
      const listMissions = (token: string) => politeCall(deployment.gatewayUrl, 'GET', '/api/missions', { token });
      const publishedKids = async (): Promise<string[]> =>
        ((await (await fetch(`${deployment.issuer}/jwks`)).json()) as { keys: Array<{ kid: string }> }).keys.map((key) => key.kid);

      const before = await newToken();
      const oldKid = kidOf(before);
      expect((await listMissions(before)).status).toBe(200);

      const env = {
        ...process.env,
        GATEWAY_URL: deployment.gatewayUrl,
        IDP_ISSUER: deployment.issuer,
        ADMIN_CLIENT_ID: deployment.admin.clientId,
        ADMIN_CLIENT_SECRET: deployment.admin.clientSecret,
      };
      const cli = await promisify(execFile)(process.execPath, ['-r', './tools/register.cjs', path.join('apps', 'admin-cli', 'src', 'main.ts'), 'keys', 'rotate'], {
        cwd: REPO_ROOT,
        env,
      });
      const rotated = JSON.parse(cli.stdout) as { kid: string; state: string; activatesAt: string };
      expect(rotated).toEqual({ kid: expect.any(String), state: 'published', activatesAt: expect.any(String) });
      expect(rotated.kid).not.toBe(oldKid);
      const activatesAt = Date.parse(rotated.activatesAt);

      // Published at once, next to the key that still signs.
      expect(await publishedKids()).toEqual(expect.arrayContaining([oldKid, rotated.kid]));
      const meanwhile = await newToken();
      if (Date.now() < activatesAt) expect(kidOf(meanwhile)).toBe(oldKid);
      // A second rotation waits for the pending one (unless it already signs: the delay is short here).
      const again = await call(deployment.gatewayUrl, 'POST', '/admin/keys/rotate', { token: context.adminToken });
      if (Date.now() < activatesAt) expectProblem(again, 409, 'conflict');

      // After the delay new tokens carry the new kid, and the gateway accepts them (refetching its JWKS).
      const after = await eventually(
        async () => {
          const token = await newToken();
          return kidOf(token) === rotated.kid ? token : undefined;
        },
        'new tokens to carry the new kid',
        20_000,
      );
      await eventually(async () => ((await listMissions(after)).status === 200 ? true : undefined), 'the gateway to accept the new key', 45_000);

      // Tokens signed before the rotation stay valid: the old key is still published.
      expect((await listMissions(before)).status).toBe(200);
      expect((await listMissions(tenantA.token)).status).toBe(200);
      expect(await publishedKids()).toEqual(expect.arrayContaining([oldKid, rotated.kid]));
    }, 120_000);
  });
}
