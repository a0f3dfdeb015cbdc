/**
 * The identity provider under a guessing attack: how fast other tenants still get their tokens.
 * Target: their token requests p99 ≤ 1 s while 50 wrong-secret requests a second arrive.
 *
 *   node -r ./tools/register.cjs bench/idp-throttle.ts [--rate=50] [--seconds=20] [--victims=20]
 *        [--sources=50] [--write]
 *
 * One all-in-one server (apps/standalone, embedded PostgreSQL, the throttle's budgets in memory).
 * The attacker sends wrong secrets at a fixed rate, cycling through the client ids of `victims`
 * tenants (so each id's burst of failures costs a verification) and through `sources` loopback
 * addresses (127.0.0.2…, so no single source's budget stops it), as a botnet guessing at known
 * client ids would. Bystanders of another tenant ask for tokens throughout: one client that has
 * had tokens before, in a closed loop, and clients asking for their first token (a verification
 * each, on the same thread pool as the attack's), one a second. Both are measured first without
 * the attack, then under it, in the same run.
 */
import { ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { freePort } from '@mission/persistence';
import { call, clientCredentialsToken } from '../test/support/api-client';
import { percentiles } from './support/stats';

const REPO_ROOT = path.join(__dirname, '..');
const log = (message: string): void => void process.stderr.write(`[bench:idp-throttle] ${message}\n`);
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

interface Options {
  readonly rate: number;
  readonly seconds: number;
  readonly victims: number;
  readonly sources: number;
  readonly write: boolean;
}

function parseOptions(argv: readonly string[]): Options {
  const values = new Map(argv.map((arg) => /^--([a-z]+)(?:=(.*))?$/.exec(arg)).map((match) => [match?.[1] ?? '', match?.[2] ?? 'true']));
  const known = ['rate', 'seconds', 'victims', 'sources', 'write'];
  const unknown = [...values.keys()].filter((key) => !known.includes(key));
  if (unknown.length > 0) throw new Error(`Unknown option(s): ${unknown.join(', ')}; known: ${known.map((key) => `--${key}`).join(' ')}`);
  const number = (name: string, fallback: number, max = Infinity): number => {
    const raw = values.get(name);
    const value = raw === undefined ? fallback : Number(raw);
    if (!Number.isInteger(value) || value <= 0 || value > max) throw new Error(`--${name} must be a whole number from 1 to ${max}`);
    return value;
  };
  return {
    rate: number('rate', 50, 1_000),
    seconds: number('seconds', 20, 600),
    victims: number('victims', 20, 200),
    sources: number('sources', 50, 250),
    write: values.has('write'),
  };
}

interface Credentials {
  readonly clientId: string;
  readonly clientSecret: string;
}

/** POST /token with client_secret_basic from `localAddress`; resolves with the status and the time it took. */
function tokenRequest(tokenUrl: URL, client: Credentials, agent: http.Agent, localAddress?: string): Promise<{ status: number; ms: number; error?: string }> {
  const body = 'grant_type=client_credentials';
  const started = performance.now();
  return new Promise((resolve) => {
    const request = http.request(
      {
        host: tokenUrl.hostname,
        port: tokenUrl.port,
        path: tokenUrl.pathname,
        method: 'POST',
        agent,
        ...(localAddress ? { localAddress } : {}),
        headers: {
          authorization: `Basic ${Buffer.from(`${encodeURIComponent(client.clientId)}:${encodeURIComponent(client.clientSecret)}`).toString('base64')}`,
          'content-type': 'application/x-www-form-urlencoded',
          'content-length': Buffer.byteLength(body),
        },
        timeout: 30_000,
      },
      (response) => {
        response.resume();
        response.once('end', () => resolve({ status: response.statusCode ?? 0, ms: performance.now() - started }));
      },
    );
    request.once('timeout', () => request.destroy(new Error('timed out')));
    request.once('error', (error: NodeJS.ErrnoException) => resolve({ status: 0, ms: performance.now() - started, error: error.code ?? error.message }));
    request.end(body);
  });
}

function summary(samples: ReadonlyArray<{ status: number; ms: number }>): { requests: number; ok: number; p50: number; p99: number; max: number } {
  const { p50, p99, max } = percentiles(samples.map((sample) => sample.ms));
  return { requests: samples.length, ok: samples.filter((sample) => sample.status === 200).length, p50, p99, max };
}

async function main(): Promise<void> {
  const options = parseOptions(process.argv.slice(2));
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'mission-bench-idp-throttle-'));
  const [port, idpPort, opsPort] = [await freePort(), await freePort(), await freePort()];
  const gatewayUrl = `http://127.0.0.1:${port}`;
  const issuer = `http://127.0.0.1:${idpPort}`;
  const server: ChildProcess = spawn(process.execPath, ['-r', './tools/register.cjs', 'apps/standalone/src/main.ts'], {
    cwd: REPO_ROOT,
    env: {
      ...process.env,
      NODE_ENV: 'production',
      LOG_LEVEL: 'warn',
      HOST: '127.0.0.1',
      PORT: String(port),
      IDP_PORT: String(idpPort),
      OPS_PORT: String(opsPort),
      DATA_DIR: dataDir,
      ...Object.fromEntries(['DATABASE_URL', 'KAFKA_BROKERS', 'REDIS_URL', 'ADMIN_CLIENT_ID', 'ADMIN_CLIENT_SECRET', 'PUBLIC_URL', 'IDP_ISSUER'].map((name) => [name, ''])),
    },
    stdio: ['ignore', 'ignore', 'inherit'],
    detached: true,
  });
  const agents: http.Agent[] = [];
  try {
    const deadline = Date.now() + 180_000;
    while (
      (await fetch(`${gatewayUrl}/health/ready`)
        .then((r) => r.status)
        .catch(() => 0)) !== 200
    ) {
      if (server.exitCode !== null || Date.now() > deadline) throw new Error('the server did not become ready');
      await sleep(250);
    }
    const admin = JSON.parse(await readFile(path.join(dataDir, 'admin-client.json'), 'utf8')) as Credentials;
    const operator = (await clientCredentialsToken(issuer, admin.clientId, admin.clientSecret)).access_token;
    const tenant = async (name: string): Promise<{ id: string; client: Credentials }> => {
      const created = await call(gatewayUrl, 'POST', '/admin/tenants', { token: operator, body: { name, tier: 'starter' } });
      if (created.status !== 201) throw new Error(`creating a tenant: ${created.status} ${JSON.stringify(created.body)}`);
      return { id: created.body.id, client: created.body.client };
    };
    log(`creating ${options.victims} victim tenants and a bystander`);
    const victims = await Promise.all(Array.from({ length: options.victims }, (_, i) => tenant(`Victim ${i}`)));
    const bystander = await tenant('Bystander');
    const newClient = async (): Promise<Credentials> => (await call(gatewayUrl, 'POST', `/admin/tenants/${bystander.id}/clients`, { token: operator, body: {} })).body;
    const tokenUrl = new URL(`${issuer}/token`);
    const bystanderAgent = new http.Agent({ keepAlive: true });
    agents.push(bystanderAgent);
    // The bystander's client has had a token before: its secret is verified and remembered.
    await tokenRequest(tokenUrl, bystander.client, bystanderAgent);

    const measure = async (label: string, attack: boolean): Promise<Record<string, unknown>> => {
      const fresh = await Promise.all(Array.from({ length: options.seconds }, () => newClient()));
      const until = performance.now() + options.seconds * 1000;
      const known: Array<{ status: number; ms: number }> = [];
      const first: Array<{ status: number; ms: number }> = [];
      const attackStatuses = new Map<string, number>();
      const loops: Array<Promise<void>> = [
        (async () => {
          while (performance.now() < until) known.push(await tokenRequest(tokenUrl, bystander.client, bystanderAgent));
        })(),
        (async () => {
          for (const client of fresh) {
            const started = performance.now();
            if (started >= until) break;
            first.push(await tokenRequest(tokenUrl, client, bystanderAgent));
            await sleep(Math.max(0, 1000 - (performance.now() - started)));
          }
        })(),
      ];
      if (attack) {
        const sourceAgents = Array.from({ length: options.sources }, () => new http.Agent({ keepAlive: true }));
        agents.push(...sourceAgents);
        loops.push(
          (async () => {
            const sent: Array<Promise<void>> = [];
            const interval = 1000 / options.rate;
            const start = performance.now();
            for (let i = 0; performance.now() < until; i++) {
              const victim = victims[i % victims.length];
              const source = i % options.sources;
              sent.push(
                tokenRequest(tokenUrl, { clientId: victim.client.clientId, clientSecret: `guess-${i}` }, sourceAgents[source], `127.0.0.${2 + source}`).then(
                  ({ status, error }) => {
                    const outcome = error ? `error ${error}` : String(status);
                    attackStatuses.set(outcome, (attackStatuses.get(outcome) ?? 0) + 1);
                  },
                ),
              );
              await sleep(Math.max(0, start + (i + 1) * interval - performance.now()));
            }
            await Promise.all(sent);
          })(),
        );
      }
      await Promise.all(loops);
      const result = { phase: label, knownClient: summary(known), firstToken: summary(first), ...(attack ? { attack: Object.fromEntries(attackStatuses) } : {}) };
      log(JSON.stringify(result));
      return result;
    };

    const quiet = await measure('quiet', false);
    await sleep(2_000);
    const attacked = await measure(`${options.rate} wrong secrets/s`, true);
    const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: REPO_ROOT, encoding: 'utf8' }).trim();
    const report = {
      suite: 'idp-throttle',
      date: new Date().toISOString(),
      commit,
      machine: { cpus: os.availableParallelism(), node: process.version },
      options,
      phases: [quiet, attacked],
    };
    const row = (phase: Record<string, unknown>, key: 'knownClient' | 'firstToken') => {
      const s = phase[key] as ReturnType<typeof summary>;
      return `| ${phase.phase} | ${key === 'knownClient' ? 'known client (closed loop)' : 'first token of a new client (1/s)'} | ${s.requests} | ${s.ok} | ${s.p50} | ${s.p99} | ${s.max} |`;
    };
    process.stdout.write(
      [
        '',
        `idp under a guessing attack (commit ${commit}): ${options.rate} wrong secrets/s over ${options.victims} client ids from ${options.sources} addresses, ${options.seconds} s per phase`,
        '',
        '| phase | bystander | requests | 200 | p50 ms | p99 ms | max ms |',
        '|---|---|--:|--:|--:|--:|--:|',
        row(quiet, 'knownClient'),
        row(quiet, 'firstToken'),
        row(attacked, 'knownClient'),
        row(attacked, 'firstToken'),
        '',
        `attack outcomes by status: ${JSON.stringify(attacked.attack)}`,
        '',
      ].join('\n'),
    );
    if (options.write) {
      const dir = path.join(REPO_ROOT, 'bench', 'results');
      mkdirSync(dir, { recursive: true });
      const file = path.join(dir, `idp-throttle-${report.date.slice(0, 10)}.json`);
      writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
      log(`results written to ${path.relative(REPO_ROOT, file)}`);
    }
  } finally {
    for (const agent of agents) agent.destroy();
    if (server.exitCode === null) {
      const exited = new Promise((resolve) => server.once('exit', resolve));
      server.kill('SIGTERM');
      await Promise.race([exited, sleep(30_000)]);
      if (server.exitCode === null) process.kill(-(server.pid ?? 0), 'SIGKILL');
    }
    await rm(dataDir, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  log(error instanceof Error ? (error.stack ?? error.message) : String(error));
  process.exitCode = 1;
});
