/**
 * `npm run bench [-- <suite> [options]]`: runs the benchmark suites one after another, each in its
 * own process so that none warms the next one's caches.
 *
 *   http        authenticated GET /api/missions/:id, embedded and distributed, against a bare
 *               NestJS-on-Fastify baseline, at 1 and 50 connections (bench/run.ts)
 *   missions    one-step missions through the API, embedded and distributed: submit → succeeded
 *               latency one at a time, and missions/s end to end under 32 clients (bench/missions.ts)
 *   rate-limit  the limiter on versus off, in memory and on Redis, and Redis commands per request
 *               (bench/rate-limit.ts)
 *   brain       query latency at 100k chunks in one tenant and ingestion throughput (bench/brain.ts)
 *   encryption  payload encryption on versus off: at rest, on the bus, and end to end for scale
 *               (bench/encryption.ts)
 *   idp-throttle  other tenants' token requests while wrong secrets arrive at 50 a second
 *               (bench/idp-throttle.ts)
 *   events      a state change's way to an open event stream and to a webhook, deliveries/s,
 *               memory per 1,000 streams (bench/events.ts)
 *   startup     `npm start` to ready on a fresh data directory and on a restart (bench/startup.ts)
 *
 * Without a suite every one runs with its defaults; with one, the options go to that suite.
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';

const SUITES: Readonly<Record<string, string>> = {
  http: 'run.ts',
  missions: 'missions.ts',
  'rate-limit': 'rate-limit.ts',
  brain: 'brain.ts',
  encryption: 'encryption.ts',
  'idp-throttle': 'idp-throttle.ts',
  events: 'events.ts',
  startup: 'startup.ts',
};

function runSuite(name: string, args: readonly string[]): number {
  const script = path.join(__dirname, SUITES[name] ?? '');
  process.stdout.write(`\n== bench: ${name} ==\n`);
  const result = spawnSync(process.execPath, ['-r', './tools/register.cjs', script, ...args], { cwd: path.join(__dirname, '..'), stdio: 'inherit' });
  return result.status ?? 1;
}

function main(): number {
  const [first, ...rest] = process.argv.slice(2);
  if (first && !first.startsWith('-')) {
    if (!SUITES[first]) {
      process.stderr.write(`Unknown suite "${first}"; one of: ${Object.keys(SUITES).join(', ')}\n`);
      return 2;
    }
    return runSuite(first, rest);
  }
  if (first) {
    process.stderr.write('Options belong to one suite: npm run bench -- <suite> [options]\n');
    return 2;
  }
  let failed = 0;
  for (const name of Object.keys(SUITES)) if (runSuite(name, []) !== 0) failed++;
  return failed === 0 ? 0 : 1;
}

process.exitCode = main();
