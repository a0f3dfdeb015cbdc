#!/usr/bin/env node
// Makes sure the MCP Inspector's command line is available for the integration suite, which
// drives /mcp with it. It is a large tool (a web UI, a TUI and their dependencies), so it is not
// one of the project's own dependencies: this installs one pinned version from the npm registry
// into a cache directory, once, and prints the path of its executable. Fails loudly when it
// cannot. (The Inspector declares Node.js >= 22.19 but its CLI runs on Node.js 20.)
//
//   node scripts/infra/mcp-inspector.mjs ensure
//
// Environment: MCP_INSPECTOR_CACHE_DIR (~/.cache/mission-service/mcp-inspector).
//
// Only node: builtins are used so that this runs before any npm install.

import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { cacheDirOf, installPinned, invokedDirectly } from './npm-cache.mjs';

export const MCP_INSPECTOR_VERSION = '2.12.0';

const log = (message) => process.stderr.write(`[mcp-inspector] ${message}\n`);

function works(executable) {
  if (!fs.existsSync(executable)) return false;
  const probe = spawnSync(executable, ['--help'], { encoding: 'utf8', timeout: 60_000 });
  return probe.status === 0;
}

export function ensureMcpInspector() {
  const dir = cacheDirOf('MCP_INSPECTOR_CACHE_DIR', 'mcp-inspector', MCP_INSPECTOR_VERSION);
  const executable = path.join(dir, 'node_modules', '.bin', 'mcp-inspector');
  installPinned({ spec: `@modelcontextprotocol/inspector@${MCP_INSPECTOR_VERSION}`, dir, ready: () => works(executable), log });
  return executable;
}

if (invokedDirectly(import.meta.url)) {
  const [command] = process.argv.slice(2);
  if (command !== 'ensure') {
    log('usage: node scripts/infra/mcp-inspector.mjs ensure');
    process.exit(2);
  }
  try {
    const executable = ensureMcpInspector();
    log(`ready: ${executable}`);
    process.stdout.write(`MCP_INSPECTOR=${executable}\n`);
  } catch (error) {
    log(error instanceof Error ? error.message : String(error));
    process.exit(1);
  }
}
