import { ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import http from 'node:http';
import http2 from 'node:http2';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { Client } from 'pg';
import { KafkaBus } from '@mission/messaging';
import { freePort } from '@mission/persistence';
import { RedisRateLimiter } from '@mission/rate-limit';
import { openMissionDatabase } from '@mission/service-mission';
import { runWithTenant } from '@mission/tenant-context';
import { REPO_ROOT, RunningProcess, startProcess } from '../support/processes';
import { createTestPki, TestPki } from '../support/test-pki';
import { KafkaAccess, kafkaAccessFromStart, kafkaSaslFor } from '../support/kafka-access';

const silent = { warn: () => undefined, error: () => undefined, info: () => undefined };

interface Answer {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: string;
}

/** One HTTPS request trusting exactly `ca` (or the system's CAs when it is undefined). */
function httpsRequest(url: string, options: { ca?: string | Buffer; method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const request = https.request(url, { method: options.method ?? 'GET', headers: options.headers, ca: options.ca, agent: false }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, headers: response.headers, body: Buffer.concat(chunks).toString('utf8') }));
    });
    request.on('error', reject);
    request.end(options.body);
  });
}

/** A plain-HTTP request to a port that speaks TLS: what a client that forgot the `s` sends. */
function plainRequest(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const request = http.get(url.replace(/^https:/, 'http:'), { agent: false, timeout: 5_000 }, (response) => {
      response.resume();
      resolve(response.statusCode ?? 0);
    });
    request.on('timeout', () => request.destroy(new Error('timed out')));
    request.on('error', reject);
  });
}

/** Connects with TLS between `minVersion` and `maxVersion` (the old versions allowed on this side too): the negotiated protocol. */
function tlsHandshake(port: number, ca: Buffer, minVersion: tls.SecureVersion, maxVersion: tls.SecureVersion): Promise<string | null> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port, ca, minVersion, maxVersion, ciphers: 'DEFAULT@SECLEVEL=0', servername: 'localhost' }, () => {
      const protocol = socket.getProtocol();
      socket.end();
      resolve(protocol);
    });
    socket.on('error', reject);
  });
}

/**
 * TLS on every hop that leaves a process, each against a real TLS server with a throwaway CA:
 * clients trusting the CA connect, clients without it fail, plaintext is refused where TLS is on.
 */
describe('TLS on every hop', () => {
  let pki: TestPki;
  let ca: Buffer;

  beforeAll(async () => {
    pki = await createTestPki();
    ca = await readFile(pki.caFile);
  });

  afterAll(async () => {
    await pki?.remove();
  });

  describe('client ↔ gateway and idp (HTTPS)', () => {
    let standalone: RunningProcess;
    let database: { drop(): Promise<void>; url: string };
    let gatewayUrl: string;
    let issuer: string;
    let dataDir: string;
    const admin = { clientId: 'operator', clientSecret: randomBytes(24).toString('base64url') };
    let tenantClient: { clientId: string; clientSecret: string } | undefined;
    let tokenEndpoint = '';

    beforeAll(async () => {
      const { createTestDatabase } = await import('@mission/persistence');
      database = await createTestDatabase(process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres', 'tls');
      dataDir = await mkdtemp(path.join(os.tmpdir(), 'mission-tls-'));
      const [port, idpPort, opsPort] = [await freePort(), await freePort(), await freePort()];
      gatewayUrl = `https://127.0.0.1:${port}`;
      issuer = `https://127.0.0.1:${idpPort}`;
      standalone = startProcess('standalone-tls', 'apps/standalone/src/main.ts', {
        PORT: String(port),
        IDP_PORT: String(idpPort),
        OPS_PORT: String(opsPort),
        DATA_DIR: dataDir,
        DATABASE_URL: database.url,
        KAFKA_BROKERS: '',
        REDIS_URL: '',
        PUBLIC_URL: '',
        IDP_ISSUER: '',
        ADMIN_CLIENT_ID: admin.clientId,
        ADMIN_CLIENT_SECRET: admin.clientSecret,
        TLS_CERT: pki.certFile,
        TLS_KEY: pki.keyFile,
        // The gateway fetches the idp's keys over HTTPS: Node's own way to trust a private CA.
        NODE_EXTRA_CA_CERTS: pki.caFile,
      });
      await waitUntilReadyOverTls(`${gatewayUrl}/health/ready`);
    }, 120_000);

    /** waitUntilReady speaks plain HTTP; this polls over HTTPS with the test CA. */
    async function waitUntilReadyOverTls(url: string): Promise<void> {
      const deadline = Date.now() + 90_000;
      for (;;) {
        if (standalone.child.exitCode !== null) throw new Error(`standalone exited with ${standalone.child.exitCode}: ${standalone.output()}`);
        const answer = await httpsRequest(url, { ca }).catch(() => undefined);
        if (answer?.status === 200) return;
        if (Date.now() > deadline) throw new Error(`${url} never became ready: ${standalone.output()}`);
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    }

    afterAll(async () => {
      if (standalone) {
        const code = await standalone.stop();
        if (code !== 0) throw new Error(`The all-in-one process exited with ${code} on SIGTERM:\n${standalone.output()}`);
      }
      await database?.drop();
      await rm(dataDir, { recursive: true, force: true });
    }, 60_000);

    it('serves HTTPS with HSTS to a client that trusts the CA, and an https issuer', async () => {
      const ready = await httpsRequest(`${gatewayUrl}/health/ready`, { ca });
      expect(ready.status).toBe(200);
      expect(ready.headers['strict-transport-security']).toBe('max-age=31536000; includeSubDomains');
      const metadata = JSON.parse((await httpsRequest(`${gatewayUrl}/.well-known/oauth-protected-resource`, { ca })).body) as { resource: string; authorization_servers: string[] };
      expect(metadata).toMatchObject({ resource: gatewayUrl, authorization_servers: [issuer] });
    });

    it('issues tokens over HTTPS that the gateway checks against keys it fetched over HTTPS', async () => {
      const discovery = JSON.parse((await httpsRequest(`${issuer}/.well-known/openid-configuration`, { ca })).body) as { token_endpoint: string; jwks_uri: string };
      expect(discovery.token_endpoint.startsWith(`${issuer}/`)).toBe(true);
      expect(discovery.jwks_uri.startsWith('https://')).toBe(true);
      const token = await httpsRequest(discovery.token_endpoint, {
        ca,
        method: 'POST',
        headers: { authorization: `Basic ${Buffer.from(`${admin.clientId}:${admin.clientSecret}`).toString('base64')}`, 'content-type': 'application/x-www-form-urlencoded' },
        body: 'grant_type=client_credentials',
      });
      expect(token.status).toBe(200);
      const accessToken = (JSON.parse(token.body) as { access_token: string }).access_token;
      const tenant = await httpsRequest(`${gatewayUrl}/admin/tenants`, {
        ca,
        method: 'POST',
        headers: { authorization: `Bearer ${accessToken}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'Over TLS', tier: 'starter' }),
      });
      expect(tenant.status).toBe(201);
      tenantClient = (JSON.parse(tenant.body) as { client: { clientId: string; clientSecret: string } }).client;
      tokenEndpoint = discovery.token_endpoint;
    });

    it('speaks HTTP/2 to clients that offer it', async () => {
      const session = http2.connect(gatewayUrl, { ca });
      try {
        const { status, alpn } = await new Promise<{ status: number; alpn: string | false | undefined }>((resolve, reject) => {
          const stream = session.request({ ':path': '/health/live' });
          stream.on('response', (headers) => {
            resolve({ status: Number(headers[':status']), alpn: session.alpnProtocol });
            stream.close();
          });
          stream.on('error', reject);
          stream.end();
        });
        expect({ status, alpn }).toEqual({ status: 200, alpn: 'h2' });
      } finally {
        session.close();
      }
    });

    it('serves MCP over HTTP/2 with a tenant token', async () => {
      if (!tenantClient) throw new Error('the token test provisions the tenant first');
      const token = await httpsRequest(tokenEndpoint, {
        ca,
        method: 'POST',
        headers: {
          authorization: `Basic ${Buffer.from(`${tenantClient.clientId}:${tenantClient.clientSecret}`).toString('base64')}`,
          'content-type': 'application/x-www-form-urlencoded',
        },
        body: 'grant_type=client_credentials',
      });
      const accessToken = (JSON.parse(token.body) as { access_token: string }).access_token;
      const session = http2.connect(gatewayUrl, { ca });
      try {
        const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
          const stream = session.request({
            ':method': 'POST',
            ':path': '/mcp',
            authorization: `Bearer ${accessToken}`,
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
            'mcp-protocol-version': '2025-11-25',
          });
          let status = 0;
          const chunks: Buffer[] = [];
          stream.on('response', (headers) => (status = Number(headers[':status'])));
          stream.on('data', (chunk: Buffer) => chunks.push(chunk));
          stream.on('end', () => resolve({ status, body: Buffer.concat(chunks).toString('utf8') }));
          stream.on('error', reject);
          stream.end(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }));
        });
        expect(answer.status).toBe(200);
        expect(answer.body).toContain('submit_mission');
      } finally {
        session.close();
      }
    });

    it('is refused by clients without the CA, or trusting another one', async () => {
      await expect(httpsRequest(`${gatewayUrl}/health/live`)).rejects.toThrow(/self[- ]signed|unable to (get|verify)/i);
      await expect(httpsRequest(`${gatewayUrl}/health/live`, { ca: await readFile(pki.otherCaFile) })).rejects.toThrow(/self[- ]signed|unable to (get|verify)/i);
      await expect(httpsRequest(`${issuer}/health/live`)).rejects.toThrow(/self[- ]signed|unable to (get|verify)/i);
    });

    it('refuses plaintext HTTP on its port, and TLS older than 1.2', async () => {
      await expect(plainRequest(`${gatewayUrl}/health/live`)).rejects.toThrow();
      await expect(plainRequest(`${issuer}/health/live`)).rejects.toThrow();
      const port = Number(new URL(gatewayUrl).port);
      // The control: this client does negotiate TLS 1.1 with a server that allows it.
      const oldServer = tls.createServer({ cert: await readFile(pki.certFile), key: await readFile(pki.keyFile), minVersion: 'TLSv1', ciphers: 'DEFAULT@SECLEVEL=0' }, (socket) =>
        socket.end(),
      );
      const oldPort = await new Promise<number>((resolve) => oldServer.listen(0, '127.0.0.1', () => resolve((oldServer.address() as { port: number }).port)));
      try {
        expect(await tlsHandshake(oldPort, ca, 'TLSv1', 'TLSv1.1')).toBe('TLSv1.1');
      } finally {
        oldServer.close();
      }
      await expect(tlsHandshake(port, ca, 'TLSv1', 'TLSv1.1')).rejects.toThrow(/protocol|alert|version/i);
      await expect(tlsHandshake(Number(new URL(issuer).port), ca, 'TLSv1', 'TLSv1.1')).rejects.toThrow(/protocol|alert|version/i);
      expect(await tlsHandshake(port, ca, 'TLSv1.2', 'TLSv1.2')).toBe('TLSv1.2');
    });
  });

  describe('services ↔ PostgreSQL (sslmode=verify-full)', () => {
    let server: RunningProcess | undefined;
    let dir: string | undefined;
    let port: number;
    const password = randomBytes(18).toString('base64url');

    /** A PostgreSQL cluster of its own that accepts only TLS connections, with the test certificate. */
    beforeAll(async () => {
      dir = await mkdtemp(path.join(os.tmpdir(), 'mission-pg-tls-'));
      port = await freePort();
      server = startProcess('tls-postgres', 'test/support/tls-postgres-server.ts', {
        PG_TLS_DIR: dir,
        PG_TLS_PORT: String(port),
        PG_TLS_CERT: pki.certFile,
        PG_TLS_KEY: pki.keyFile,
        PG_TLS_PASSWORD: password,
      });
      const deadline = Date.now() + 60_000;
      const url = `postgres://mission:${password}@127.0.0.1:${port}/postgres?sslmode=verify-full&sslrootcert=${encodeURIComponent(pki.caFile)}`;
      for (;;) {
        const client = new Client({ connectionString: url });
        try {
          await client.connect();
          await client.query('CREATE DATABASE mission');
          await client.end();
          break;
        } catch (error) {
          await client.end().catch(() => undefined);
          if (server.child.exitCode !== null || Date.now() > deadline) throw new Error(`TLS PostgreSQL did not start (${String(error)}): ${server.output()}`);
          await new Promise((resolve) => setTimeout(resolve, 250));
        }
      }
    }, 90_000);

    afterAll(async () => {
      await server?.stop();
      if (dir) await rm(dir, { recursive: true, force: true });
    }, 30_000);

    const urlWith = (query: string) => `postgres://mission:${password}@127.0.0.1:${port}/mission?${query}`;

    it('migrates and serves a service schema over verify-full TLS with the CA', async () => {
      const url = urlWith(`sslmode=verify-full&sslrootcert=${encodeURIComponent(pki.caFile)}`);
      const client = new Client({ connectionString: url });
      await client.connect();
      try {
        const { rows } = await client.query('SELECT ssl, version FROM pg_stat_ssl WHERE pid = pg_backend_pid()');
        expect(rows[0]).toMatchObject({ ssl: true, version: expect.stringMatching(/^TLSv1\.[23]$/) });
      } finally {
        await client.end();
      }
      // The server takes nothing but TLS (pg_hba), so a service that migrates and queries did so over it.
      const dataSource = await openMissionDatabase(url);
      try {
        const missions = await runWithTenant({ tenantId: randomUUID() }, () => dataSource.query('SELECT count(*)::int AS n FROM mission.missions'));
        expect(missions).toEqual([{ n: 0 }]);
      } finally {
        await dataSource.destroy();
      }
    });

    it('fails without the CA, with another CA, and in plaintext', async () => {
      const attempt = async (url: string) => {
        const client = new Client({ connectionString: url });
        try {
          await client.connect();
        } finally {
          await client.end().catch(() => undefined);
        }
      };
      await expect(attempt(urlWith('sslmode=verify-full'))).rejects.toThrow(/self[- ]signed|unable to (get|verify)/i);
      await expect(attempt(urlWith(`sslmode=verify-full&sslrootcert=${encodeURIComponent(pki.otherCaFile)}`))).rejects.toThrow(/self[- ]signed|unable to (get|verify)/i);
      await expect(attempt(urlWith('sslmode=disable'))).rejects.toThrow(/no pg_hba.conf entry|rejects connection/i);
    });
  });

  describe('gateway ↔ Redis (rediss://)', () => {
    let redis: ChildProcess;
    let port: number;

    beforeAll(async () => {
      port = await freePort();
      redis = spawn(
        'redis-server',
        [
          '--port',
          '0',
          '--tls-port',
          String(port),
          '--bind',
          '127.0.0.1',
          '--tls-cert-file',
          pki.certFile,
          '--tls-key-file',
          pki.keyFile,
          '--tls-ca-cert-file',
          pki.caFile,
          '--tls-auth-clients',
          'no',
          '--save',
          '',
          '--appendonly',
          'no',
        ],
        {
          stdio: 'ignore',
        },
      );
      const deadline = Date.now() + 10_000;
      while (!(await tlsHandshake(port, ca, 'TLSv1.2', 'TLSv1.3').catch(() => null))) {
        if (Date.now() > deadline) throw new Error('redis-server with TLS did not start');
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    });

    afterAll(async () => {
      const exited = new Promise((resolve) => redis.once('exit', resolve));
      redis.kill('SIGKILL');
      await exited;
    });

    async function modeWith(url: string, tlsCa?: string): Promise<{ mode: string; store: string }> {
      const limiter = new RedisRateLimiter({ url, tlsCa, replicas: 1, logger: silent, startTimeoutMs: 2_000 });
      try {
        await limiter.start();
        const decision = await limiter.consume(`tls-test:${randomUUID()}`, { name: 'starter', limit: 100 });
        return { mode: limiter.status().mode, store: decision.store };
      } finally {
        await limiter.close();
      }
    }

    it('shares the buckets over TLS with the CA', async () => {
      expect(await modeWith(`rediss://127.0.0.1:${port}`, ca.toString('utf8'))).toEqual({ mode: 'redis', store: 'redis' });
    });

    it('falls back to its own memory, never to plaintext, without the CA or over redis://', async () => {
      expect(await modeWith(`rediss://127.0.0.1:${port}`)).toEqual({ mode: 'fallback', store: 'fallback' });
      expect(await modeWith(`rediss://127.0.0.1:${port}`, (await readFile(pki.otherCaFile)).toString('utf8'))).toEqual({ mode: 'fallback', store: 'fallback' });
      expect(await modeWith(`redis://127.0.0.1:${port}`)).toEqual({ mode: 'fallback', store: 'fallback' });
    });
  });

  describe('services ↔ Kafka (SSL listener)', () => {
    let stateDir: string;
    let brokers: string;
    let access: KafkaAccess;
    const kafka = (command: string, env: Record<string, string>): string =>
      execFileSync(process.execPath, [path.join(REPO_ROOT, 'scripts', 'infra', 'kafka.mjs'), command], {
        cwd: REPO_ROOT,
        env: { ...process.env, ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      }).toString('utf8');
    let env: Record<string, string>;

    beforeAll(async () => {
      stateDir = await mkdtemp(path.join(os.tmpdir(), 'mission-kafka-tls-'));
      env = {
        KAFKA_STATE_DIR: stateDir,
        KAFKA_PORT: String(await freePort()),
        KAFKA_CONTROLLER_PORT: String(await freePort()),
        KAFKA_SSL_KEYSTORE: pki.keystoreFile,
        KAFKA_SSL_TRUSTSTORE: pki.caFile,
      };
      // SASL over TLS (SASL_SSL): the sign-in below never crosses the wire in the clear.
      access = kafkaAccessFromStart(kafka('start', env));
      brokers = access.brokers;
      expect(access.mechanism).toBe('scram-sha-512');
      expect(brokers).toMatch(/^127\.0\.0\.1:\d+$/);
    }, 180_000);

    afterAll(async () => {
      if (env) kafka('stop', env);
      await rm(stateDir, { recursive: true, force: true });
    }, 60_000);

    const newBus = (ssl: tls.ConnectionOptions | undefined) =>
      new KafkaBus({
        brokers: [brokers],
        sasl: kafkaSaslFor(access, 'admin'),
        clientId: `tls-${randomUUID().slice(0, 8)}`,
        ssl,
        logger: silent,
        topics: [{ name: 'tls.events', partitions: 1 }],
        requestTimeoutMs: 5_000,
      });

    it('publishes and consumes over TLS with the CA', async () => {
      const bus = newBus({ ca: [ca.toString('utf8')], minVersion: 'TLSv1.2' });
      const seen: unknown[] = [];
      bus.subscribe('tls.events', `tls-${randomUUID().slice(0, 8)}`, async (message) => {
        seen.push(message.payload);
      });
      await bus.start();
      try {
        await runWithTenant({ tenantId: randomUUID() }, () => bus.publish('tls.events', { type: 'ping', key: 'k', payload: { over: 'tls' } }));
        const deadline = Date.now() + 20_000;
        while (seen.length === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
        expect(seen).toEqual([{ over: 'tls' }]);
      } finally {
        await bus.close();
      }
    }, 60_000);

    it('cannot start without the CA, with another CA, or in plaintext', async () => {
      // Side by side: each start fails only after kafkajs's connection retries, some 12 s.
      const settings = [{ minVersion: 'TLSv1.2' as const }, { ca: [(await readFile(pki.otherCaFile)).toString('utf8')] }, undefined];
      const outcomes = await Promise.allSettled(
        settings.map(async (ssl) => {
          const bus = newBus(ssl);
          try {
            await bus.start();
          } finally {
            await bus.close().catch(() => undefined);
          }
        }),
      );
      expect(outcomes.map((outcome) => outcome.status)).toEqual(['rejected', 'rejected', 'rejected']);
    }, 180_000);
  });
});
