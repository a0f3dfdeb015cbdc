#!/usr/bin/env node
// Makes sure the official MCP conformance suite (@modelcontextprotocol/conformance) is available
// for the integration suite, which runs its server scenarios against /mcp. It needs Node.js 22 or
// later: it runs on the Node.js LTS that node-lts.mjs provides. Like the MCP Inspector it is not a
// dependency of the project: one pinned version is installed into a cache directory, once.
//
//   node scripts/infra/mcp-conformance.mjs ensure   print MCP_CONFORMANCE=<entry> and NODE_LTS=<node>
//
// Environment: MCP_CONFORMANCE_CACHE_DIR (~/.cache/mission-service/mcp-conformance).

import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { cacheDirOf, installPinned, invokedDirectly } from './npm-cache.mjs';
import { ensureNodeLts } from './node-lts.mjs';

export const MCP_CONFORMANCE_VERSION = '0.1.16';

const log = (message) => process.stderr.write(`[mcp-conformance] ${message}\n`);

export function ensureMcpConformance() {
  const node = ensureNodeLts();
  const dir = cacheDirOf('MCP_CONFORMANCE_CACHE_DIR', 'mcp-conformance', MCP_CONFORMANCE_VERSION);
  const entry = path.join(dir, 'node_modules', '@modelcontextprotocol', 'conformance', 'dist', 'index.js');
  const works = () => fs.existsSync(entry) && spawnSync(node, [entry, '--version'], { encoding: 'utf8', timeout: 60_000 }).stdout?.trim() === MCP_CONFORMANCE_VERSION;
  installPinned({ spec: `@modelcontextprotocol/conformance@${MCP_CONFORMANCE_VERSION}`, dir, ready: works, log });
  return { node, entry };
}

if (invokedDirectly(import.meta.url)) {
  if (process.argv[2] !== 'ensure') {
    log('usage: node scripts/infra/mcp-conformance.mjs ensure');
    process.exit(2);
  }
  try {
    const { node, entry } = ensureMcpConformance();
    process.stdout.write(`MCP_CONFORMANCE=${entry}\nNODE_LTS=${node}\n`);
  } catch (error) {
    log(error instanceof Error ? error.message : String(error));
    process.exit(1);
  }
}
