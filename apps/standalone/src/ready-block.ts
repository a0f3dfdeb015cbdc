import path from 'node:path';
import { consoleUrl } from '@mission/contracts';
import type { StandaloneHandle } from './standalone';

/** Where everything is, for a person at a terminal, once the process is ready. */
export function readyBlock(handle: Pick<StandaloneHandle, 'gatewayUrl' | 'issuer' | 'opsUrl' | 'dataDir'>, startupMs: number, cwd: string = process.cwd()): string {
  const data = path.relative(cwd, handle.dataDir) || '.';
  const shown = data.startsWith('..') ? handle.dataDir : data;
  const dataEnv = shown === '.data' ? '' : `DATA_DIR='${shown.replace(/'/g, `'\\''`)}' `;
  const approvals = consoleUrl(handle.gatewayUrl);
  return [
    '',
    `  Mission Service is ready (${(startupMs / 1000).toFixed(1)} s)`,
    '',
    `  API            ${handle.gatewayUrl}/api    docs: ${handle.gatewayUrl}/api/docs`,
    `  MCP            ${handle.gatewayUrl}/mcp`,
    `  Approvals      ${approvals}    (the console, for a tenant's users)`,
    `  Sign-in (idp)  ${handle.issuer}`,
    `  Operations     ${handle.opsUrl}/metrics    ${handle.opsUrl}/health/ready`,
    `  Data           ${shown}    (operator credentials: ${path.join(shown, 'admin-client.json')})`,
    '',
    '  A tenant and a token, in another terminal:',
    `    eval "$(${dataEnv}npm run -s admin -- quickstart)"`,
    `    curl -s -X POST ${handle.gatewayUrl}/api/missions -H "Authorization: Bearer $TOKEN" \\`,
    `      -H 'Content-Type: application/json' -d '{"title":"First mission","objective":"Say hello"}'`,
    '',
    '  A person who decides approvals, and the link that signs them in to the console:',
    `    read -rs PASSWORD && echo "$PASSWORD" | ${dataEnv}npm run -s admin -- users create "$TENANT_ID" --username ada --password-stdin`,
    `    echo "Open ${approvals}?org=$TENANT_ID and sign in as ada"`,
    '',
    '  Ctrl-C stops everything.',
    '',
  ].join('\n');
}
