#!/usr/bin/env node
// Single-node Apache Kafka (KRaft) for local development and integration tests,
// run from the jars that tools/kafka/pom.xml resolves from Maven Central.
//
//   node scripts/infra/kafka.mjs fetch           download the broker jars (cached per version)
//   node scripts/infra/kafka.mjs start [--fresh] start the broker, print KAFKA_BROKERS=host:port
//   node scripts/infra/kafka.mjs stop            stop the broker started by `start`
//   node scripts/infra/kafka.mjs status          exit 0 when running and reachable, 1 otherwise
//
// Environment: KAFKA_VERSION (default: kafka.version in tools/kafka/pom.xml),
// KAFKA_CACHE_DIR (~/.cache/mission-service/kafka), KAFKA_STATE_DIR (<repo>/.data/kafka),
// KAFKA_PORT (19092), KAFKA_CONTROLLER_PORT (19093), KAFKA_START_TIMEOUT_MS (90000),
// KAFKA_SSL_KEYSTORE (a PEM file with the key and certificate chain: clients then connect over
// TLS), KAFKA_SSL_TRUSTSTORE (PEM CAs), KAFKA_AUTH (`scram`, the default, or `none`) and
// KAFKA_USERS (the SCRAM users besides `admin`, comma-separated; default: the platform's services).
//
// With KAFKA_AUTH=scram the broker authenticates every client (SASL/SCRAM-SHA-512) and authorizes
// it (StandardAuthorizer, deny unless an ACL allows): `admin` is a super user, every other user
// may do only what ACLs grant it (`npm run kafka:setup` applies the platform's). A password per
// user is generated on first start into <state>/credentials/<user>.password (mode 0600); `start`
// prints KAFKA_SASL_MECHANISM and KAFKA_CREDENTIALS_DIR beside KAFKA_BROKERS.
//
// Only node: builtins are used so that this runs before any npm install.

import { spawn } from 'node:child_process';
import { createHash, createHmac, pbkdf2Sync, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import net from 'node:net';
import tls from 'node:tls';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const TOOLS_DIR = path.join(REPO_ROOT, 'tools/kafka');
const POM = path.join(TOOLS_DIR, 'pom.xml');
const HOST = '127.0.0.1';
const NODE_ID = 1;
const STOP_GRACE_MS = 30_000;
const FETCH_LOCK_WAIT_MS = 10 * 60_000;
const LOG_TAIL_LINES = 60;
/** The platform's services, each its own Kafka principal (libs/messaging's platform ACLs name them too). */
const DEFAULT_USERS = ['gateway', 'idp', 'mission-service', 'brain-service', 'hit-service', 'notification-service', 'standalone'];
/** The broker's own identity, towards its controller and itself: a super user. */
const BROKER_USER = 'broker';
const ADMIN_USER = 'admin';
const SASL_MECHANISM = 'SCRAM-SHA-512';

const defaultLog = (message) => process.stderr.write(`[kafka] ${message}\n`);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// ---------------------------------------------------------------------------
// Configuration

export function resolveConfig(opts = {}) {
  const env = opts.env ?? process.env;
  const version = String(opts.version ?? env.KAFKA_VERSION ?? pomKafkaVersion());
  if (!/^\d+\.\d+\.\d+$/.test(version)) throw new Error(`invalid Kafka version "${version}"`);
  const cacheRoot = path.resolve(opts.cacheDir ?? env.KAFKA_CACHE_DIR ?? path.join(os.homedir(), '.cache/mission-service/kafka'));
  const versionDir = path.join(cacheRoot, version);
  const stateDir = path.resolve(opts.stateDir ?? env.KAFKA_STATE_DIR ?? path.join(REPO_ROOT, '.data/kafka'));
  const port = toPort(opts.port ?? env.KAFKA_PORT ?? 19092, 'KAFKA_PORT');
  const controllerPort = toPort(opts.controllerPort ?? env.KAFKA_CONTROLLER_PORT ?? 19093, 'KAFKA_CONTROLLER_PORT');
  if (port === controllerPort) throw new Error('KAFKA_PORT and KAFKA_CONTROLLER_PORT must differ');
  // A PEM keystore (private key and certificate chain in one file) makes the client listener SSL.
  const sslKeystore = opts.sslKeystore ?? env.KAFKA_SSL_KEYSTORE ?? '';
  const sslTruststore = opts.sslTruststore ?? env.KAFKA_SSL_TRUSTSTORE ?? '';
  const timeoutMs = Number(opts.timeoutMs ?? env.KAFKA_START_TIMEOUT_MS ?? 90_000);
  if (!(timeoutMs > 0)) throw new Error('KAFKA_START_TIMEOUT_MS must be a positive number');
  const auth = String(opts.auth ?? env.KAFKA_AUTH ?? 'scram');
  if (auth !== 'scram' && auth !== 'none') throw new Error(`KAFKA_AUTH must be scram or none, not "${auth}"`);
  const users = [
    ...new Set(
      String(opts.users ?? env.KAFKA_USERS ?? DEFAULT_USERS.join(','))
        .split(',')
        .map((user) => user.trim())
        .filter(Boolean),
    ),
  ];
  for (const user of users) {
    if (!/^[a-zA-Z0-9._-]+$/.test(user) || user === BROKER_USER) throw new Error(`KAFKA_USERS: "${user}" is not a usable user name`);
  }

  return {
    version,
    // Kafka 3.x logs through log4j 1.x (reload4j), 4.x through log4j2.
    legacyLogging: Number(version.split('.')[0]) < 4,
    versionDir,
    libsDir: path.join(versionDir, 'libs'),
    fetchMarker: path.join(versionDir, '.fetched'),
    stateDir,
    dataDir: path.join(stateDir, 'data'),
    propsFile: path.join(stateDir, 'server.properties'),
    clusterIdFile: path.join(stateDir, 'cluster.id'),
    logFile: path.join(stateDir, 'kafka.log'),
    pidFile: path.join(stateDir, 'kafka.pid'),
    lockDir: `${stateDir}.lock`,
    port,
    controllerPort,
    brokers: `${HOST}:${port}`,
    sslKeystore: sslKeystore ? path.resolve(sslKeystore) : '',
    sslTruststore: sslTruststore ? path.resolve(sslTruststore) : '',
    auth,
    users: [ADMIN_USER, ...users.filter((user) => user !== ADMIN_USER)],
    credentialsDir: path.join(stateDir, 'credentials'),
    timeoutMs,
    log: opts.log ?? defaultLog,
  };
}

function pomKafkaVersion() {
  const match = fs.readFileSync(POM, 'utf8').match(/<kafka\.version>\s*([^<\s]+)\s*<\/kafka\.version>/);
  if (!match) throw new Error(`no <kafka.version> property in ${POM}`);
  return match[1];
}

function toPort(value, name) {
  const port = Number(value);
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new Error(`${name} is not a valid port: ${value}`);
  return port;
}

/** The name (and security protocol) of the clients' listener. */
function clientListener(cfg) {
  // Over TLS when the broker has a keystore (KAFKA_SSL_KEYSTORE), else in plaintext; SASL on top with KAFKA_AUTH=scram.
  const transport = cfg.sslKeystore ? 'SSL' : 'PLAINTEXT';
  return cfg.auth === 'scram' ? (transport === 'SSL' ? 'SASL_SSL' : 'SASL_PLAINTEXT') : transport;
}

/** SASL and ACL settings: SCRAM for clients, PLAIN (a static broker user) on the controller listener. */
function authProperties(cfg, client, secrets) {
  if (cfg.auth !== 'scram') return [];
  const jaas = (module, options) =>
    `${module} required ${Object.entries(options)
      .map(([key, value]) => `${key}="${value}"`)
      .join(' ')};`;
  const listener = client.toLowerCase();
  return [
    `sasl.enabled.mechanisms=${SASL_MECHANISM}`,
    `sasl.mechanism.inter.broker.protocol=${SASL_MECHANISM}`,
    `listener.name.${listener}.${SASL_MECHANISM.toLowerCase()}.sasl.jaas.config=${jaas('org.apache.kafka.common.security.scram.ScramLoginModule', { username: BROKER_USER, password: secrets[BROKER_USER] })}`,
    // SCRAM credentials live in the metadata log, which a controller needs before it can read
    // them: its listener authenticates the broker with a static PLAIN user instead.
    'sasl.mechanism.controller.protocol=PLAIN',
    'listener.name.controller.sasl.enabled.mechanisms=PLAIN',
    `listener.name.controller.plain.sasl.jaas.config=${jaas('org.apache.kafka.common.security.plain.PlainLoginModule', {
      username: BROKER_USER,
      password: secrets[BROKER_USER],
      [`user_${BROKER_USER}`]: secrets[BROKER_USER],
    })}`,
    'authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer',
    'allow.everyone.if.no.acl.found=false',
    `super.users=User:${BROKER_USER};User:${ADMIN_USER}`,
  ];
}

export function serverProperties(cfg, secrets = {}) {
  const client = clientListener(cfg);
  const ssl = cfg.sslKeystore
    ? [
        'ssl.keystore.type=PEM',
        `ssl.keystore.location=${cfg.sslKeystore}`,
        'ssl.enabled.protocols=TLSv1.3,TLSv1.2',
        ...(cfg.sslTruststore ? ['ssl.truststore.type=PEM', `ssl.truststore.location=${cfg.sslTruststore}`] : []),
      ]
    : [];
  const cores = os.availableParallelism();
  return [
    '# Generated by scripts/infra/kafka.mjs on every start; edits are overwritten.',
    'process.roles=broker,controller',
    `node.id=${NODE_ID}`,
    `controller.quorum.voters=${NODE_ID}@${HOST}:${cfg.controllerPort}`,
    `listeners=${client}://${HOST}:${cfg.port},CONTROLLER://${HOST}:${cfg.controllerPort}`,
    `advertised.listeners=${client}://${HOST}:${cfg.port}`,
    'controller.listener.names=CONTROLLER',
    `inter.broker.listener.name=${client}`,
    ...ssl,
    ...authProperties(cfg, client, secrets),
    `listener.security.protocol.map=CONTROLLER:${cfg.auth === 'scram' ? 'SASL_PLAINTEXT' : 'PLAINTEXT'},PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL`,
    `log.dirs=${cfg.dataDir}`,
    'num.partitions=3',
    'auto.create.topics.enable=false',
    'group.initial.rebalance.delay.ms=0',
    '# Threads sized to this machine (the defaults, 3 and 8, assume a server of its own):',
    '# on a laptop or CI runner the broker shares its cores with the services.',
    `num.network.threads=${Math.min(3, Math.max(2, Math.ceil(cores / 2)))}`,
    `num.io.threads=${Math.min(8, Math.max(2, cores))}`,
    '# One broker: internal topics must not ask for more replicas than exist,',
    '# otherwise consumer groups never find a coordinator.',
    'offsets.topic.replication.factor=1',
    'offsets.topic.num.partitions=1',
    'transaction.state.log.replication.factor=1',
    'transaction.state.log.min.isr=1',
    'share.coordinator.state.topic.replication.factor=1',
    'share.coordinator.state.topic.min.isr=1',
    '',
  ].join('\n');
}

// ---------------------------------------------------------------------------
// fetch

export async function fetchKafka(opts = {}) {
  return fetchLibs(resolveConfig(opts));
}

async function fetchLibs(cfg) {
  const pomHash = sha256(fs.readFileSync(POM));
  if (isFetched(cfg, pomHash)) return cfg.libsDir;
  // Brokers of other state dirs may fetch the same version at the same time.
  return withLock(`${cfg.versionDir}.lock`, FETCH_LOCK_WAIT_MS, cfg.log, () => fetchLocked(cfg, pomHash));
}

async function fetchLocked(cfg, pomHash) {
  if (isFetched(cfg, pomHash)) return cfg.libsDir;
  await requireCommand('mvn', ['-v'], 'Maven (mvn) is required to fetch the Kafka broker; install it (apt-get install maven)');
  await fsp.rm(cfg.fetchMarker, { force: true });
  await fsp.rm(cfg.libsDir, { recursive: true, force: true });
  await fsp.mkdir(cfg.versionDir, { recursive: true });

  // -U: retry artifacts whose earlier download failed instead of trusting Maven's cached failure.
  const args = ['-q', '-B', '-U', '-f', POM, 'dependency:copy-dependencies', '-DincludeScope=runtime', `-DoutputDirectory=${cfg.libsDir}`, `-Dkafka.version=${cfg.version}`];
  if (cfg.legacyLogging) args.push('-Dreload4j');
  cfg.log(`fetching Kafka ${cfg.version} from Maven Central into ${cfg.libsDir}`);
  const started = Date.now();
  const { code, output } = await run('mvn', args);
  if (code !== 0 || !fs.existsSync(path.join(cfg.libsDir, `kafka_2.13-${cfg.version}.jar`))) {
    await fsp.rm(cfg.libsDir, { recursive: true, force: true });
    throw new Error(`mvn failed to fetch Kafka ${cfg.version} (exit ${code}).\n` + `Command: mvn ${args.join(' ')}\n${tail(output, 30)}`);
  }
  const jars = fs
    .readdirSync(cfg.libsDir)
    .filter((f) => f.endsWith('.jar'))
    .sort();
  await fsp.writeFile(cfg.fetchMarker, `${JSON.stringify({ version: cfg.version, pomSha256: pomHash, jars }, null, 2)}\n`);
  cfg.log(`fetched ${jars.length} jars in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  return cfg.libsDir;
}

// The marker records the pom's hash, so changing the logging binding refetches too.
function isFetched(cfg, pomHash) {
  try {
    const marker = JSON.parse(fs.readFileSync(cfg.fetchMarker, 'utf8'));
    return marker.pomSha256 === pomHash && marker.jars.every((jar) => fs.existsSync(path.join(cfg.libsDir, jar)));
  } catch {
    return false;
  }
}

// ---------------------------------------------------------------------------
// start / stop / status

export async function startKafka(opts = {}) {
  const cfg = resolveConfig(opts);
  return withStateLock(cfg, async () => {
    if (opts.fresh) {
      await stopLocked(cfg);
      await fsp.rm(cfg.stateDir, { recursive: true, force: true });
    }

    const existing = readPidFile(cfg);
    if (existing && isOurBroker(existing.pid, cfg)) {
      if (existing.port !== cfg.port) {
        throw new Error(`the broker of ${cfg.stateDir} (pid ${existing.pid}) listens on port ${existing.port}, not ${cfg.port}; stop it first`);
      }
      await waitUntilReady(cfg, existing.pid, Date.now() + cfg.timeoutMs);
      cfg.log(`already running (pid ${existing.pid}) on ${cfg.brokers}`);
      return info(cfg, existing.pid, true);
    }
    await fsp.rm(cfg.pidFile, { force: true });

    for (const [name, port] of [
      ['KAFKA_PORT', cfg.port],
      ['KAFKA_CONTROLLER_PORT', cfg.controllerPort],
    ]) {
      if (await canConnect(HOST, port)) {
        throw new Error(
          `${HOST}:${port} is already in use by a process this script did not start ` + `(no live broker recorded in ${cfg.pidFile}); stop it or choose another ${name}`,
        );
      }
    }

    await requireCommand('java', ['-version'], 'Java 17+ is required to run Kafka (apt-get install openjdk-17-jre-headless)');
    await fetchLibs(cfg);
    await fsp.mkdir(cfg.dataDir, { recursive: true });
    const secrets = await ensureCredentials(cfg);
    // The properties hold the broker's own password: readable by this user only, from the start
    // (a file left by an older version keeps its mode when written over, so it goes first).
    await fsp.rm(cfg.propsFile, { force: true });
    await fsp.writeFile(cfg.propsFile, serverProperties(cfg, secrets), { mode: 0o600 });
    await formatStorage(cfg, secrets);

    const started = Date.now();
    const logFd = fs.openSync(cfg.logFile, 'w');
    const child = spawn('java', [...jvmOptions(cfg), ...brokerJvmTuning(), 'kafka.Kafka', cfg.propsFile], { cwd: cfg.stateDir, detached: true, stdio: ['ignore', logFd, logFd] });
    fs.closeSync(logFd);
    const spawnError = new Promise((_, reject) => child.once('error', reject));
    spawnError.catch(() => {});
    child.unref();
    if (!child.pid) await spawnError;
    fs.writeFileSync(cfg.pidFile, `${JSON.stringify({ pid: child.pid, port: cfg.port, controllerPort: cfg.controllerPort, version: cfg.version })}\n`);
    cfg.log(`starting Kafka ${cfg.version} (pid ${child.pid}), log: ${cfg.logFile}`);

    try {
      await waitUntilReady(cfg, child.pid, started + cfg.timeoutMs);
    } catch (err) {
      // Don't leave a half-started broker behind to block the next attempt.
      await stopLocked(cfg);
      throw err;
    }
    cfg.log(`ready on ${cfg.brokers} after ${((Date.now() - started) / 1000).toFixed(1)} s`);
    return info(cfg, child.pid, false);
  });
}

export async function stopKafka(opts = {}) {
  const cfg = resolveConfig(opts);
  return withStateLock(cfg, () => stopLocked(cfg));
}

export async function kafkaStatus(opts = {}) {
  const cfg = resolveConfig(opts);
  const existing = readPidFile(cfg);
  if (!existing || !isOurBroker(existing.pid, cfg)) {
    return { running: false, reason: `no broker running for ${cfg.stateDir}` };
  }
  const brokers = `${HOST}:${existing.port}`;
  try {
    const probe = await probeBroker(HOST, existing.port, { timeoutMs: 3000, tls: tlsOf(cfg), sasl: saslOf(cfg) });
    if (probe.ready) return { running: true, pid: existing.pid, brokers, version: existing.version };
    return { running: false, pid: existing.pid, brokers, reason: probe.detail };
  } catch (err) {
    return { running: false, pid: existing.pid, brokers, reason: `broker not reachable: ${err.message}` };
  }
}

function info(cfg, pid, alreadyRunning) {
  return {
    brokers: cfg.brokers,
    pid,
    version: cfg.version,
    stateDir: cfg.stateDir,
    logFile: cfg.logFile,
    credentialsDir: cfg.auth === 'scram' ? cfg.credentialsDir : undefined,
    alreadyRunning,
  };
}

async function stopLocked(cfg) {
  const existing = readPidFile(cfg);
  if (!existing || !isOurBroker(existing.pid, cfg)) {
    await fsp.rm(cfg.pidFile, { force: true });
    return false;
  }
  const { pid } = existing;
  cfg.log(`stopping broker (pid ${pid})`);
  signal(pid, 'SIGTERM');
  if (!(await waitForExit(pid, STOP_GRACE_MS))) {
    cfg.log(`broker did not stop within ${STOP_GRACE_MS / 1000} s, sending SIGKILL`);
    signal(pid, 'SIGKILL');
    if (!(await waitForExit(pid, 10_000))) throw new Error(`could not kill broker pid ${pid}`);
  }
  await fsp.rm(cfg.pidFile, { force: true });
  cfg.log('stopped');
  return true;
}

/**
 * The broker's heap and garbage collector, as Kafka's own start scripts take them:
 * KAFKA_HEAP_OPTS and KAFKA_JVM_PERFORMANCE_OPTS (whitespace-separated) replace the defaults.
 */
function brokerJvmTuning(env = process.env) {
  const words = (value) => value.trim().split(/\s+/).filter(Boolean);
  const heap = env.KAFKA_HEAP_OPTS?.trim() ? words(env.KAFKA_HEAP_OPTS) : ['-Xmx512m'];
  const performance = env.KAFKA_JVM_PERFORMANCE_OPTS?.trim()
    ? words(env.KAFKA_JVM_PERFORMANCE_OPTS)
    : ['-XX:+UseG1GC', '-XX:MaxGCPauseMillis=20', '-XX:InitiatingHeapOccupancyPercent=35', '-XX:+ExplicitGCInvokesConcurrent'];
  return [...heap, ...performance];
}

function jvmOptions(cfg) {
  const logging = cfg.legacyLogging
    ? `-Dlog4j.configuration=file:${path.join(TOOLS_DIR, 'log4j.properties')}`
    : `-Dlog4j2.configurationFile=${path.join(TOOLS_DIR, 'log4j2.properties')}`;
  return ['-cp', path.join(cfg.libsDir, '*'), '-Djava.awt.headless=true', logging];
}

/**
 * The password of the broker, of `admin` and of every user, generated once per state directory
 * (mode 0600 in a 0700 directory). SCRAM credentials are written into the metadata log when the
 * storage is formatted, so a user added later needs a fresh state (`start --fresh`).
 */
async function ensureCredentials(cfg) {
  if (cfg.auth !== 'scram') return {};
  await fsp.mkdir(cfg.credentialsDir, { recursive: true, mode: 0o700 });
  await fsp.chmod(cfg.credentialsDir, 0o700);
  const formatted = fs.existsSync(path.join(cfg.dataDir, 'meta.properties'));
  const secrets = {};
  for (const user of [BROKER_USER, ...cfg.users]) {
    const file = credentialFile(cfg, user);
    let secret = readText(file);
    if (!secret) {
      if (formatted) throw new Error(`Kafka user "${user}" is not known to the broker of ${cfg.stateDir} (it was formatted without it): start it with --fresh`);
      secret = randomBytes(24).toString('hex');
      await fsp.writeFile(file, `${secret}\n`, { mode: 0o600 });
    }
    secrets[user] = secret;
  }
  return secrets;
}

function credentialFile(cfg, user) {
  return path.join(cfg.credentialsDir, `${user}.password`);
}

async function formatStorage(cfg, secrets) {
  if (fs.existsSync(path.join(cfg.dataDir, 'meta.properties'))) return;
  let clusterId = readText(cfg.clusterIdFile);
  if (!clusterId) {
    const res = await runJava(cfg, ['kafka.tools.StorageTool', 'random-uuid']);
    clusterId = res.stdout
      .trim()
      .split('\n')
      .map((line) => line.trim())
      .reverse()
      .find((line) => /^[\w-]{22}$/.test(line));
    if (!clusterId) throw new Error(`StorageTool random-uuid printed no cluster id:\n${res.output}`);
    await fsp.writeFile(cfg.clusterIdFile, `${clusterId}\n`);
  }
  const scram = cfg.auth === 'scram' ? [BROKER_USER, ...cfg.users].flatMap((user) => ['--add-scram', `${SASL_MECHANISM}=[name=${user},password=${secrets[user]}]`]) : [];
  await runJava(cfg, ['kafka.tools.StorageTool', 'format', '-t', clusterId, '-c', cfg.propsFile, '--ignore-formatted', ...scram]);
}

async function runJava(cfg, args) {
  const res = await run('java', [...jvmOptions(cfg), '-Xmx256m', ...args]);
  if (res.code !== 0) {
    const shown = args.map((arg) => arg.replace(/password=[^,\]]*/g, 'password=[redacted]'));
    throw new Error(`java ${shown.join(' ')} failed (exit ${res.code}):\n${tail(res.output, 30)}`);
  }
  return res;
}

async function waitUntilReady(cfg, pid, deadline) {
  let lastError = 'no answer yet';
  while (Date.now() < deadline) {
    if (!isAlive(pid)) {
      throw new Error(`Kafka broker (pid ${pid}) exited during startup. Last lines of ${cfg.logFile}:\n${logTail(cfg)}`);
    }
    try {
      const probe = await probeBroker(HOST, cfg.port, { timeoutMs: 2000, coordinators: true, tls: tlsOf(cfg), sasl: saslOf(cfg) });
      if (probe.ready) return;
      lastError = probe.detail;
    } catch (err) {
      lastError = err.message;
    }
    await sleep(250);
  }
  throw new Error(
    `Kafka broker (pid ${pid}) was not ready on ${cfg.brokers} within ${cfg.timeoutMs / 1000} s ` + `(last probe: ${lastError}). Last lines of ${cfg.logFile}:\n${logTail(cfg)}`,
  );
}

// ---------------------------------------------------------------------------
// Readiness probe: a minimal Kafka protocol client. The broker binds its port
// before it can serve requests, so a TCP connect alone proves little; a
// Metadata response that lists this node means it is registered and unfenced.
// With `coordinators`, it also waits until the broker hands out producer ids and
// a group coordinator (creating __consumer_offsets on a fresh broker): right
// after a (re)start both answer "coordinator is loading" for a while, which
// clients retry but log as errors.

const API = { metadata: 3, findCoordinator: 10, saslHandshake: 17, apiVersions: 18, initProducerId: 22, saslAuthenticate: 36 };

/** How the probe signs in where the broker wants SASL: as `admin`, with its generated password. */
function saslOf(cfg) {
  return cfg.auth === 'scram' ? { username: ADMIN_USER, password: readText(credentialFile(cfg, ADMIN_USER)) } : undefined;
}

/**
 * A SCRAM-SHA-512 exchange (RFC 5802, 7677) over SaslHandshake v1 and SaslAuthenticate v0:
 * `call(apiKey, version, body)` sends one request and returns the response's reader.
 */
async function scramSignIn(call, { username, password }) {
  const handshake = await call(API.saslHandshake, 1, [kafkaString(SASL_MECHANISM)]);
  const handshakeError = handshake.int16();
  if (handshakeError !== 0) throw new Error(`SaslHandshake error ${handshakeError}`);
  const exchange = async (message) => {
    const reply = await call(API.saslAuthenticate, 0, [kafkaBytes(Buffer.from(message))]);
    const code = reply.int16();
    const detail = reply.string();
    if (code !== 0) throw new Error(`SASL authentication failed (error ${code}${detail ? `: ${detail}` : ''})`);
    return reply.bytes().toString('utf8');
  };
  const nonce = randomBytes(18).toString('base64');
  const clientFirstBare = `n=${username.replace(/=/g, '=3D').replace(/,/g, '=2C')},r=${nonce}`;
  const serverFirst = await exchange(`n,,${clientFirstBare}`);
  const fields = Object.fromEntries(serverFirst.split(',').map((part) => [part[0], part.slice(2)]));
  if (!fields.r?.startsWith(nonce) || !fields.s || !(Number(fields.i) > 0)) throw new Error('SCRAM: unexpected server-first message');
  const salted = pbkdf2Sync(password, Buffer.from(fields.s, 'base64'), Number(fields.i), 64, 'sha512');
  const clientKey = createHmac('sha512', salted).update('Client Key').digest();
  const storedKey = createHash('sha512').update(clientKey).digest();
  const withoutProof = `c=biws,r=${fields.r}`;
  const authMessage = `${clientFirstBare},${serverFirst},${withoutProof}`;
  const signature = createHmac('sha512', storedKey).update(authMessage).digest();
  const proof = Buffer.from(clientKey.map((byte, i) => byte ^ signature[i])).toString('base64');
  const serverFinal = await exchange(`${withoutProof},p=${proof}`);
  const serverKey = createHmac('sha512', salted).update('Server Key').digest();
  const expected = createHmac('sha512', serverKey).update(authMessage).digest('base64');
  if (serverFinal !== `v=${expected}`) throw new Error('SCRAM: the broker did not prove it knows the password');
}

/** How the probe reaches an SSL listener: TLS, trusting the truststore's CAs. */
function tlsOf(cfg) {
  return cfg.sslKeystore ? { ca: cfg.sslTruststore ? fs.readFileSync(cfg.sslTruststore) : undefined } : undefined;
}

export async function probeBroker(host, port, { timeoutMs = 2000, coordinators = false, tls: tlsOptions, sasl } = {}) {
  const socket = await connect(host, port, timeoutMs, tlsOptions);
  try {
    const next = frameReader(socket);
    let correlationId = 0;
    const call = async (apiKey, apiVersion, body) => {
      const id = ++correlationId;
      socket.write(encodeRequest(apiKey, apiVersion, id, Buffer.concat(body)));
      const reader = new Reader(await next());
      if (reader.int32() !== id) throw new Error('unexpected correlation id');
      return reader;
    };

    if (sasl) await scramSignIn(call, sasl);

    // ApiVersions v0: every broker version answers it.
    const versions = await call(API.apiVersions, 0, []);
    const errorCode = versions.int16();
    if (errorCode !== 0) throw new Error(`ApiVersions error ${errorCode}`);
    const ranges = new Map();
    for (let i = versions.int32(); i > 0; i--) {
      ranges.set(versions.int16(), [versions.int16(), versions.int16()]);
    }
    // Only the pre-"flexible" versions of each request are encoded here.
    const pick = (apiKey, lowest, highest) => {
      const [min, max] = ranges.get(apiKey) ?? [1, 0];
      const version = Math.max(lowest, min);
      if (version > Math.min(highest, max)) {
        throw new Error(`broker supports no version ${lowest}..${highest} of API ${apiKey} (has ${min}..${max})`);
      }
      return version;
    };

    // Metadata for no topics, allow_auto_topic_creation=false.
    const metadata = await call(API.metadata, pick(API.metadata, 4, 8), [int32(0), Buffer.from([0])]);
    metadata.int32(); // throttle_time_ms
    const nodeIds = [];
    for (let i = metadata.int32(); i > 0; i--) {
      nodeIds.push(metadata.int32());
      metadata.string(); // host
      metadata.int32(); // port
      metadata.string(); // rack
    }
    if (!nodeIds.includes(NODE_ID)) {
      return { ready: false, detail: `metadata lists brokers [${nodeIds.join(', ')}], waiting for node ${NODE_ID}` };
    }
    if (!coordinators) return { ready: true };

    // InitProducerId without a transactional id, as idempotent producers send it.
    const producerId = await call(API.initProducerId, pick(API.initProducerId, 0, 1), [int16(-1), int32(60_000)]);
    producerId.int32(); // throttle_time_ms
    const producerError = producerId.int16();
    if (producerError !== 0) return { ready: false, detail: `InitProducerId error ${producerError}` };

    // FindCoordinator for a consumer group (key_type 0).
    const coordinator = await call(API.findCoordinator, pick(API.findCoordinator, 1, 2), [kafkaString('mission-service-infra-probe'), Buffer.from([0])]);
    coordinator.int32(); // throttle_time_ms
    const coordinatorError = coordinator.int16();
    if (coordinatorError !== 0) return { ready: false, detail: `FindCoordinator error ${coordinatorError}` };
    return { ready: true };
  } finally {
    socket.destroy();
  }
}

function int16(value) {
  const buf = Buffer.alloc(2);
  buf.writeInt16BE(value);
  return buf;
}

function int32(value) {
  const buf = Buffer.alloc(4);
  buf.writeInt32BE(value);
  return buf;
}

function kafkaBytes(value) {
  return Buffer.concat([int32(value.length), value]);
}

function kafkaString(value) {
  const bytes = Buffer.from(value);
  return Buffer.concat([int16(bytes.length), bytes]);
}

// Request header v1: api_key, api_version, correlation_id, client_id.
function encodeRequest(apiKey, apiVersion, correlationId, body) {
  const header = Buffer.concat([int16(apiKey), int16(apiVersion), int32(correlationId), kafkaString('mission-service-infra')]);
  return Buffer.concat([int32(header.length + body.length), header, body]);
}

class Reader {
  constructor(buf) {
    this.buf = buf;
    this.pos = 0;
  }
  int16() {
    const v = this.buf.readInt16BE(this.pos);
    this.pos += 2;
    return v;
  }
  int32() {
    const v = this.buf.readInt32BE(this.pos);
    this.pos += 4;
    return v;
  }
  bytes() {
    const len = this.int32();
    if (len < 0) return Buffer.alloc(0);
    const v = this.buf.subarray(this.pos, this.pos + len);
    this.pos += len;
    return v;
  }
  string() {
    const len = this.int16();
    if (len < 0) return null;
    const v = this.buf.toString('utf8', this.pos, this.pos + len);
    this.pos += len;
    return v;
  }
}

// Returns a function that resolves with the next length-prefixed response frame.
function frameReader(socket) {
  let buffered = Buffer.alloc(0);
  let waiter = null;
  let failure = null;
  const pump = () => {
    if (!waiter) return;
    if (buffered.length >= 4 && buffered.length >= 4 + buffered.readInt32BE(0)) {
      const end = 4 + buffered.readInt32BE(0);
      const frame = buffered.subarray(4, end);
      buffered = buffered.subarray(end);
      const { resolve } = waiter;
      waiter = null;
      resolve(frame);
    } else if (failure) {
      const { reject } = waiter;
      waiter = null;
      reject(failure);
    }
  };
  socket.on('data', (chunk) => {
    buffered = Buffer.concat([buffered, chunk]);
    pump();
  });
  socket.on('error', (err) => {
    failure = err;
    pump();
  });
  socket.on('close', () => {
    failure ??= new Error('connection closed by broker');
    pump();
  });
  return () =>
    new Promise((resolve, reject) => {
      waiter = { resolve, reject };
      pump();
    });
}

function connect(host, port, timeoutMs, tlsOptions) {
  return new Promise((resolve, reject) => {
    const socket = tlsOptions ? tls.connect({ host, port, ...tlsOptions }) : net.createConnection({ host, port });
    socket.setTimeout(timeoutMs, () => socket.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    socket.once('error', reject);
    socket.once(tlsOptions ? 'secureConnect' : 'connect', () => {
      socket.off('error', reject);
      resolve(socket);
    });
  });
}

async function canConnect(host, port, timeoutMs = 1000) {
  try {
    (await connect(host, port, timeoutMs)).destroy();
    return true;
  } catch {
    return false;
  }
}

// ---------------------------------------------------------------------------
// Processes, files and locking

function readPidFile(cfg) {
  try {
    const data = JSON.parse(fs.readFileSync(cfg.pidFile, 'utf8'));
    return Number.isInteger(data.pid) && data.pid > 0 ? data : null;
  } catch {
    return null;
  }
}

// Guards against a recycled pid: the process must be a broker using this state dir.
function isOurBroker(pid, cfg) {
  if (!isAlive(pid)) return false;
  try {
    const cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    return cmdline.includes('kafka.Kafka') && cmdline.includes(cfg.propsFile);
  } catch {
    return process.platform !== 'linux';
  }
}

function isAlive(pid) {
  try {
    process.kill(pid, 0);
  } catch (err) {
    return err.code === 'EPERM';
  }
  // A process that has exited but was not reaped yet (a zombie) still accepts signal 0.
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return process.platform !== 'linux';
  }
}

function signal(pid, name) {
  try {
    process.kill(pid, name);
  } catch (err) {
    if (err.code !== 'ESRCH') throw err;
  }
}

async function waitForExit(pid, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (!isAlive(pid)) return true;
    await sleep(200);
  }
  return !isAlive(pid);
}

// Serialises start/stop on one state dir, e.g. test runners starting in parallel.
function withStateLock(cfg, fn) {
  const waitMs = FETCH_LOCK_WAIT_MS + cfg.timeoutMs + STOP_GRACE_MS;
  return withLock(cfg.lockDir, waitMs, cfg.log, fn);
}

// A directory as an inter-process lock; a lock whose owner process died is taken over.
async function withLock(lockDir, waitMs, log, fn) {
  await fsp.mkdir(path.dirname(lockDir), { recursive: true });
  const ownerFile = path.join(lockDir, 'owner');
  const deadline = Date.now() + waitMs;
  let announced = false;
  for (;;) {
    try {
      fs.mkdirSync(lockDir);
      fs.writeFileSync(ownerFile, String(process.pid));
      break;
    } catch (err) {
      if (err.code !== 'EEXIST') throw err;
    }
    const owner = Number(readText(ownerFile));
    const ageMs = Date.now() - (fs.statSync(lockDir, { throwIfNoEntry: false })?.mtimeMs ?? Date.now());
    if ((owner && !isAlive(owner)) || (!owner && ageMs > 10_000)) {
      fs.rmSync(lockDir, { recursive: true, force: true });
      continue;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${lockDir} (held by pid ${owner})`);
    if (!announced) {
      log(`waiting for pid ${owner} to release ${lockDir}`);
      announced = true;
    }
    await sleep(200);
  }
  try {
    return await fn();
  } finally {
    fs.rmSync(lockDir, { recursive: true, force: true });
  }
}

function run(command, args) {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let output = '';
    child.stdout.on('data', (chunk) => {
      stdout += chunk;
      output += chunk;
    });
    child.stderr.on('data', (chunk) => {
      output += chunk;
    });
    child.once('error', reject);
    child.once('close', (code, sig) => resolve({ code: code ?? sig, stdout, output }));
  });
}

async function requireCommand(command, args, message) {
  try {
    await run(command, args);
  } catch (err) {
    if (err.code === 'ENOENT') throw new Error(`${message}: "${command}" is not on PATH`);
    throw err;
  }
}

function readText(file) {
  try {
    return fs.readFileSync(file, 'utf8').trim();
  } catch {
    return '';
  }
}

function tail(text, lines) {
  // Debian's mvn wrapper prints colour resets even in batch mode.
  const plain = text.replace(/\x1b\[[0-9;]*m/g, '');
  return plain.trimEnd().split('\n').slice(-lines).join('\n');
}

function logTail(cfg) {
  return tail(readText(cfg.logFile) || '(log is empty)', LOG_TAIL_LINES);
}

function sha256(data) {
  return createHash('sha256').update(data).digest('hex');
}

// ---------------------------------------------------------------------------
// CLI

const USAGE = 'usage: node scripts/infra/kafka.mjs <start [--fresh] | stop | status | fetch>';

async function main(argv) {
  const [command, ...rest] = argv;
  const flags = new Set(rest);
  const unknown = rest.filter((arg) => !(command === 'start' && arg === '--fresh'));
  if (unknown.length) throw new UsageError(`unknown argument(s): ${unknown.join(' ')}\n${USAGE}`);

  switch (command) {
    case 'fetch':
      await fetchKafka();
      return 0;
    case 'start': {
      const { brokers, credentialsDir } = await startKafka({ fresh: flags.has('--fresh') });
      process.stdout.write(`KAFKA_BROKERS=${brokers}\n`);
      if (credentialsDir) process.stdout.write(`KAFKA_SASL_MECHANISM=${SASL_MECHANISM.toLowerCase()}\nKAFKA_CREDENTIALS_DIR=${credentialsDir}\n`);
      return 0;
    }
    case 'stop':
      if (!(await stopKafka())) defaultLog('not running');
      return 0;
    case 'status': {
      const status = await kafkaStatus();
      if (status.running) {
        process.stdout.write(`running: Kafka ${status.version} (pid ${status.pid}) on ${status.brokers}\n`);
        return 0;
      }
      process.stdout.write(`not running: ${status.reason}\n`);
      return 1;
    }
    default:
      throw new UsageError(USAGE);
  }
}

class UsageError extends Error {}

function invokedDirectly() {
  if (!process.argv[1]) return false;
  try {
    return fs.realpathSync(process.argv[1]) === fs.realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

if (invokedDirectly()) {
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (err) => {
      process.stderr.write(`[kafka] error: ${err.message}\n`);
      process.exitCode = err instanceof UsageError ? 2 : 1;
    },
  );
}
