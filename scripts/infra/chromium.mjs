#!/usr/bin/env node
// Makes sure Debian's Chromium is installed for the browser tests (playwright-core drives
// /usr/bin/chromium; Playwright's own browser downloads are not used). Installs the `chromium`
// package with apt-get when it is missing, and fails loudly when it cannot.
//
//   node scripts/infra/chromium.mjs ensure
//
// Environment: CHROMIUM_PATH (/usr/bin/chromium).
//
// Only node: builtins are used so that this runs before any npm install.

import { spawnSync } from 'node:child_process';
import fs from 'node:fs';

export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

const log = (message) => process.stderr.write(`[chromium] ${message}\n`);

function works(executable) {
  if (!fs.existsSync(executable)) return false;
  const probe = spawnSync(executable, ['--headless', '--no-sandbox', '--version'], { encoding: 'utf8', timeout: 30_000 });
  return probe.status === 0;
}

function run(command, args) {
  log(`${command} ${args.join(' ')}`);
  const result = spawnSync(command, args, { stdio: ['ignore', 'inherit', 'inherit'], env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' }, timeout: 15 * 60_000 });
  if (result.error) throw new Error(`${command} could not run: ${result.error.message}`);
  if (result.status !== 0) throw new Error(`${command} ${args.join(' ')} exited with ${result.status}`);
}

export function ensureChromium() {
  if (works(CHROMIUM_PATH)) return CHROMIUM_PATH;
  if (CHROMIUM_PATH !== '/usr/bin/chromium') throw new Error(`CHROMIUM_PATH=${CHROMIUM_PATH} does not run`);
  const root = typeof process.getuid === 'function' && process.getuid() === 0;
  const prefix = root ? [] : ['sudo', '-n'];
  if (!root && spawnSync('sudo', ['-n', 'true']).status !== 0) {
    throw new Error('Chromium is not installed and this user cannot install it: run `apt-get install chromium` as root');
  }
  log('Chromium is missing: installing Debian’s chromium package');
  const [command, ...rest] = [...prefix, 'apt-get'];
  run(command, [...rest, 'update']);
  run(command, [...rest, 'install', '-y', '--no-install-recommends', 'chromium']);
  if (!works(CHROMIUM_PATH)) throw new Error(`apt-get installed chromium, but ${CHROMIUM_PATH} does not run`);
  return CHROMIUM_PATH;
}

if (process.argv[1] && import.meta.url === `file://${process.argv[1]}`) {
  const [command] = process.argv.slice(2);
  if (command !== 'ensure') {
    log('usage: node scripts/infra/chromium.mjs ensure');
    process.exit(2);
  }
  try {
    const executable = ensureChromium();
    log(`ready: ${executable}`);
  } catch (error) {
    log(error instanceof Error ? error.message : String(error));
    process.exit(1);
  }
}
