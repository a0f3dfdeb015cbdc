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
import os from 'node:os';
import path from 'node:path';

export const MCP_INSPECTOR_VERSION = '2.12.0';

const log = (message) => process.stderr.write(`[mcp-inspector] ${message}\n`);

function cacheDir() {
  const base = process.env.MCP_INSPECTOR_CACHE_DIR ?? path.join(os.homedir(), '.cache', 'mission-service', 'mcp-inspector');
  return path.join(base, MCP_INSPECTOR_VERSION);
}

function executableIn(dir) {
  return path.join(dir, 'node_modules', '.bin', 'mcp-inspector');
}

function works(executable) {
  if (!fs.existsSync(executable)) return false;
  const probe = spawnSync(executable, ['--help'], { encoding: 'utf8', timeout: 60_000 });
  return probe.status === 0;
}

export function ensureMcpInspector() {
  const dir = cacheDir();
  const executable = executableIn(dir);
  if (works(executable)) return executable;
  log(`installing @modelcontextprotocol/inspector@${MCP_INSPECTOR_VERSION} into ${dir}`);
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'mcp-inspector-cache', private: true }));
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const result = spawnSync(
    npm,
    ['install', '--no-audit', '--no-fund', '--ignore-scripts', '--no-package-lock', `@modelcontextprotocol/inspector@${MCP_INSPECTOR_VERSION}`],
    { cwd: dir, stdio: ['ignore', 'inherit', 'inherit'], timeout: 10 * 60_000 },
  );
  if (result.error) throw new Error(`npm could not run: ${result.error.message}`);
  if (result.status !== 0) throw new Error(`npm install @modelcontextprotocol/inspector@${MCP_INSPECTOR_VERSION} exited with ${result.status}`);
  if (!works(executable)) throw new Error(`the MCP Inspector was installed, but ${executable} --help does not run`);
  return executable;
}

if (process.argv[1] && import.meta.url === `file://${process.argv[1]}`) {
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
