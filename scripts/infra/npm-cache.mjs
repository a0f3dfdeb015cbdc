// Installs one pinned package from the npm registry into a cache directory of its own, once, for
// tools the test suites run that are not dependencies of the project (a Node.js runtime, the MCP
// Inspector, the MCP conformance suite). No install scripts run. Only node: builtins are used so
// that this works before any npm install.

import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** Whether the module at `moduleUrl` is the script node was asked to run (through links and odd characters too). */
export function invokedDirectly(moduleUrl) {
  if (!process.argv[1]) return false;
  try {
    return fs.realpathSync(process.argv[1]) === fs.realpathSync(fileURLToPath(moduleUrl));
  } catch {
    return false;
  }
}

/** `<base>/<name>/<version>`: base from `variable`, else ~/.cache/mission-service. */
export function cacheDirOf(variable, name, version) {
  const base = process.env[variable] ?? path.join(os.homedir(), '.cache', 'mission-service', name);
  return path.join(base, version);
}

/**
 * Makes `ready()` true by installing `spec` (name@version) into `dir` when it is not: the directory
 * is emptied first, so a broken earlier install never stays. Throws with the reason when npm fails
 * or the installed tool still does not run.
 */
export function installPinned({ spec, dir, ready, log }) {
  if (ready()) return;
  log(`installing ${spec} into ${dir}`);
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'mission-service-tool-cache', private: true }));
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const result = spawnSync(npm, ['install', '--no-audit', '--no-fund', '--ignore-scripts', '--no-package-lock', spec], {
    cwd: dir,
    stdio: ['ignore', 'inherit', 'inherit'],
    timeout: 10 * 60_000,
  });
  if (result.error) throw new Error(`npm could not run: ${result.error.message}`);
  if (result.status !== 0) throw new Error(`npm install ${spec} exited with ${result.status}`);
  if (!ready()) throw new Error(`${spec} was installed into ${dir}, but does not run`);
}
