import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';
import { z } from 'zod';
import { busAcls, ServiceConfigSchema, type ServiceDefinition } from '@mission/runtime';
import { brainServiceDefinition, BrainServiceConfigSchema } from '@mission/service-brain';
import { GatewayConfigSchema } from '@mission/service-gateway';
import { hitServiceDefinition } from '@mission/service-hit';
import { IdpConfigSchema } from '@mission/service-idp';
import { missionServiceDefinition } from '@mission/service-mission';
import { NotificationServiceConfigSchema, notificationServiceDefinition } from '@mission/service-notification';

const root = path.join(__dirname, '..', '..');

interface ComposeService {
  readonly image?: string;
  readonly build?: string | { readonly context?: string; readonly dockerfile?: string; readonly args?: Record<string, unknown> | string[] };
  readonly environment?: Record<string, unknown> | string[];
  readonly depends_on?: string[] | Record<string, { readonly condition?: string }>;
  readonly healthcheck?: { readonly test?: unknown; readonly disable?: boolean };
}

interface ComposeFile {
  readonly services: Record<string, ComposeService>;
}

type ConfigSchema = z.ZodObject<Record<string, z.ZodType>>;

/** Each deployable of the compose file: its folder under apps/ and the schema its main.ts loads. */
/** The apps compose runs; the back-end services with the definition their process runs (runService). */
const APPS: ReadonlyArray<{ readonly service: string; readonly app: string; readonly schema: ConfigSchema; readonly definition?: ServiceDefinition }> = [
  { service: 'gateway', app: 'gateway', schema: GatewayConfigSchema },
  { service: 'idp', app: 'idp', schema: IdpConfigSchema },
  { service: 'mission-service', app: 'mission-service', schema: ServiceConfigSchema, definition: missionServiceDefinition },
  { service: 'brain-service', app: 'brain-service', schema: BrainServiceConfigSchema, definition: brainServiceDefinition },
  { service: 'hit-service', app: 'hit-service', schema: ServiceConfigSchema, definition: hitServiceDefinition },
  { service: 'notification-service', app: 'notification-service', schema: NotificationServiceConfigSchema, definition: notificationServiceDefinition },
];

const INFRASTRUCTURE = ['kafka', 'postgres', 'redis'] as const;

const compose = parse(readFileSync(path.join(root, 'docker-compose.yml'), 'utf8'), { merge: true }) as ComposeFile;

/** `KEY: value` maps and `KEY=value` lists both become a map of strings, as compose reads them. */
function keyValues(entries: Record<string, unknown> | string[] | undefined): Record<string, string> {
  if (!entries) return {};
  if (Array.isArray(entries)) {
    return Object.fromEntries(entries.map((entry) => [entry.split('=')[0], entry.slice(entry.indexOf('=') + 1)]));
  }
  return Object.fromEntries(Object.entries(entries).map(([key, value]) => [key, value === null || value === undefined ? '' : String(value)]));
}

function environmentOf(service: string): Record<string, string> {
  return keyValues(compose.services[service]?.environment);
}

/**
 * Replaces `${VAR}` / `${VAR:?message}` / `${VAR:-default}` as compose would, with a stand-in
 * secret shaped like a generated one (base64url of 32 bytes), which also fits inside a URL.
 */
function interpolate(value: string): string {
  return value.replace(/\$\{([A-Z0-9_]+)(?::?[-?][^}]*)?\}/g, (_, name: string) => Buffer.from(`${name}-stand-in`.padEnd(32, '.')).toString('base64url'));
}

function requiredKeys(schema: ConfigSchema): string[] {
  return Object.keys(schema.shape).filter((key) => !schema.shape[key].safeParse(undefined).success);
}

function dependsOn(service: string): Record<string, { readonly condition?: string }> {
  const dependencies = compose.services[service]?.depends_on;
  // The short list form means `service_started`: it never waits for a healthy dependency.
  if (Array.isArray(dependencies)) return Object.fromEntries(dependencies.map((name) => [name, { condition: 'service_started' }]));
  return dependencies ?? {};
}

function dockerfileOf(service: ComposeService): string | undefined {
  if (!service.build) return undefined;
  const build = typeof service.build === 'string' ? { context: service.build } : service.build;
  return path.resolve(root, build.context ?? '.', build.dockerfile ?? 'Dockerfile');
}

/** The address clients in the compose network use for Kafka: the SASL_PLAINTEXT advertised listener. */
function kafkaAddress(): string {
  const advertised = environmentOf('kafka').KAFKA_ADVERTISED_LISTENERS ?? '';
  const listener = advertised.split(',').find((entry) => entry.startsWith('SASL_PLAINTEXT://'));
  if (!listener) throw new Error('kafka advertises no SASL_PLAINTEXT listener');
  return listener.slice('SASL_PLAINTEXT://'.length);
}

/** The compose secrets a service is given (the short form: names). */
function secretsOf(service: string): string[] {
  return ((compose.services[service] as { secrets?: Array<string | { source: string }> }).secrets ?? []).map((secret) => (typeof secret === 'string' ? secret : secret.source));
}

describe('docker-compose.yml', () => {
  it.each(INFRASTRUCTURE)('gives %s a healthcheck', (name) => {
    const service = compose.services[name];
    expect(service).toBeDefined();
    expect(service.healthcheck?.test).toBeDefined();
    expect(service.healthcheck?.disable).not.toBe(true);
  });

  describe.each(APPS)('$service', ({ service: name, app, schema }) => {
    const service = compose.services[name];
    const environment = environmentOf(name);

    it('exists and builds the repository Dockerfile with APP set to its folder under apps/', () => {
      expect(service).toBeDefined();
      expect(service.image).toBeUndefined();
      expect(dockerfileOf(service)).toBe(path.join(root, 'Dockerfile'));
      const args = typeof service.build === 'object' ? keyValues(service.build.args) : {};
      expect(args.APP).toBe(app);
      expect(existsSync(path.join(root, 'apps', app, 'src', 'main.ts'))).toBe(true);
    });

    it('sets only variables its config schema knows', () => {
      const known = Object.keys(schema.shape);
      expect(Object.keys(environment).filter((key) => !known.includes(key))).toEqual([]);
    });

    it('sets every variable its config schema requires', () => {
      expect(requiredKeys(schema).filter((key) => environment[key] === undefined)).toEqual([]);
    });

    it('sets values its config schema accepts once compose substitutes the secrets', () => {
      const substituted = Object.fromEntries(Object.entries(environment).map(([key, value]) => [key, interpolate(value)]));
      const result = schema.safeParse(substituted);
      expect(result.success ? [] : result.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`)).toEqual([]);
    });

    it('reaches Kafka through the compose kafka service and waits until it is healthy', () => {
      expect(environment.KAFKA_BROKERS?.split(',').map((broker) => broker.trim())).toEqual([kafkaAddress()]);
      expect(kafkaAddress()).toMatch(/^kafka:\d+$/);
      expect(dependsOn(name).kafka).toEqual({ condition: 'service_healthy' });
    });

    it('signs in to Kafka as its own user with its own password, given only that secret, after the setup made its ACLs', () => {
      expect({ mechanism: environment.KAFKA_SASL_MECHANISM, user: environment.KAFKA_SASL_USERNAME, file: environment.KAFKA_SASL_PASSWORD_FILE }).toEqual({
        mechanism: 'scram-sha-512',
        user: app,
        file: `/run/secrets/${app}-kafka`,
      });
      expect(busAcls(app).length).toBeGreaterThan(0);
      expect(secretsOf(name)).toEqual([`${app}-kafka`]);
      expect(secretsOf('kafka')).toContain(`${app}-kafka`);
      expect(dependsOn(name)['kafka-setup']).toEqual({ condition: 'service_completed_successfully' });
    });

    it('reaches PostgreSQL, when it uses a database, through the compose postgres service and waits until it is healthy', () => {
      if (environment.DATABASE_URL === undefined) {
        expect(dependsOn(name).postgres).toBeUndefined();
        return;
      }
      const url = new URL(interpolate(environment.DATABASE_URL));
      const postgres = environmentOf('postgres');
      expect({ protocol: url.protocol, host: url.hostname, port: url.port || '5432', user: url.username, database: url.pathname.slice(1) }).toEqual({
        protocol: 'postgres:',
        host: 'postgres',
        port: '5432',
        user: postgres.POSTGRES_USER,
        database: postgres.POSTGRES_DB,
      });
      expect(dependsOn(name).postgres).toEqual({ condition: 'service_healthy' });
    });

    it('waits only for services that can report themselves healthy', () => {
      const dockerfileHasHealthcheck = /^HEALTHCHECK\s/m.test(readFileSync(path.join(root, 'Dockerfile'), 'utf8'));
      for (const [dependency, { condition }] of Object.entries(dependsOn(name))) {
        const target = compose.services[dependency];
        expect(target).toBeDefined();
        if (condition !== 'service_healthy') continue;
        const reportsHealth = target.healthcheck?.test !== undefined || (dockerfileOf(target) === path.join(root, 'Dockerfile') && dockerfileHasHealthcheck);
        expect({ dependency, reportsHealth }).toEqual({ dependency, reportsHealth: true });
      }
    });
  });

  it('runs the Kafka setup as the administrator, the only one besides the broker given its password', () => {
    const setup = environmentOf('kafka-setup');
    expect(setup).toMatchObject({ KAFKA_BROKERS: kafkaAddress(), KAFKA_SASL_USERNAME: 'admin', KAFKA_SASL_PASSWORD_FILE: '/run/secrets/kafka-admin' });
    expect(
      Object.keys(compose.services)
        .filter((service) => secretsOf(service).includes('kafka-admin'))
        .sort(),
    ).toEqual(['kafka', 'kafka-setup']);
    expect(dependsOn('kafka-setup').kafka).toEqual({ condition: 'service_healthy' });
    expect(existsSync(path.join(root, 'tools', 'kafka', 'compose-broker.sh'))).toBe(true);
  });

  it('sets DATABASE_URL for every app whose process refuses to start without one', () => {
    const needingDatabase = APPS.filter(
      ({ app, schema, definition }) =>
        (definition?.needsDatabase === true &&
          readFileSync(path.join(root, 'apps', app, 'src', 'main.ts'), 'utf8').includes(
            `runService(${definition.name.replace(/-(\w)/g, (_, letter: string) => letter.toUpperCase())}Definition)`,
          )) ||
        requiredKeys(schema).includes('DATABASE_URL'),
    ).map(({ service }) => service);
    expect(needingDatabase).toEqual(expect.arrayContaining(['idp', 'mission-service']));
    expect(needingDatabase.filter((service) => environmentOf(service).DATABASE_URL === undefined)).toEqual([]);
  });
});

describe('README configuration table', () => {
  const readme = readFileSync(path.join(root, 'README.md'), 'utf8');
  const section = /^## Configuration\n([\s\S]*?)(?=^## )/m.exec(readme)?.[1] ?? '';
  const documented = section
    .split('\n')
    .filter((line) => line.startsWith('|') && !/^\|\s*-/.test(line))
    .slice(1)
    .flatMap((line) => [...line.split('|')[1].matchAll(/`([A-Z][A-Z0-9_]*)`/g)].map((match) => match[1]));

  /** The standalone schema is private to its app, so its keys are read from the source. */
  const standaloneSource = readFileSync(path.join(root, 'apps', 'standalone', 'src', 'standalone.config.ts'), 'utf8');
  const standaloneKeys = [...(/z\s*\.object\(\{([\s\S]*?)\}\)/.exec(standaloneSource)?.[1] ?? '').matchAll(/^\s*([A-Z][A-Z0-9_]*):/gm)].map((match) => match[1]);
  const schemaKeys = new Set([...APPS.flatMap(({ schema }) => Object.keys(schema.shape)), ...standaloneKeys]);

  it('names variables in the first column, and the standalone variables are found in its source', () => {
    expect(documented.length).toBeGreaterThan(0);
    expect(standaloneKeys).toEqual(expect.arrayContaining(['PORT', 'IDP_PORT', 'DATA_DIR']));
  });

  it('documents only variables that some config schema reads', () => {
    expect(documented.filter((name) => !schemaKeys.has(name))).toEqual([]);
  });

  it('documents every variable that a config schema reads', () => {
    expect([...schemaKeys].filter((name) => !documented.includes(name))).toEqual([]);
  });
});
