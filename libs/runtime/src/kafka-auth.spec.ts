import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ConfigError } from '@mission/config';
import { kafkaSasl } from './kafka-auth';

describe('kafkaSasl', () => {
  let dir: string;
  let passwordFile: string;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'kafka-auth-'));
    passwordFile = path.join(dir, 'gateway.password');
    await writeFile(passwordFile, 's3cret-value\n', { mode: 0o600 });
  });

  afterAll(() => rm(dir, { recursive: true, force: true }));

  it('signs in with no SASL when nothing is set', async () => {
    await expect(kafkaSasl({})).resolves.toBeUndefined();
  });

  it('reads the password from its file, without the trailing newline', async () => {
    await expect(kafkaSasl({ KAFKA_SASL_MECHANISM: 'scram-sha-512', KAFKA_SASL_USERNAME: 'gateway', KAFKA_SASL_PASSWORD_FILE: passwordFile })).resolves.toEqual({
      mechanism: 'scram-sha-512',
      username: 'gateway',
      password: 's3cret-value',
    });
  });

  it('refuses a partial setting, naming every missing variable', async () => {
    const error = await kafkaSasl({ KAFKA_SASL_USERNAME: 'gateway' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigError);
    expect(String((error as Error).message)).toMatch(/KAFKA_SASL_MECHANISM/);
    expect(String((error as Error).message)).toMatch(/KAFKA_SASL_PASSWORD_FILE/);
  });

  it('refuses PLAIN without TLS, and takes it over TLS', async () => {
    await expect(kafkaSasl({ KAFKA_SASL_MECHANISM: 'plain', KAFKA_SASL_USERNAME: 'gateway', KAFKA_SASL_PASSWORD_FILE: passwordFile })).rejects.toThrow(/KAFKA_TLS=on/);
    await expect(kafkaSasl({ KAFKA_SASL_MECHANISM: 'plain', KAFKA_SASL_USERNAME: 'gateway', KAFKA_SASL_PASSWORD_FILE: passwordFile, KAFKA_TLS: 'on' })).resolves.toMatchObject({
      mechanism: 'plain',
    });
  });

  it('refuses an unreadable or empty password file', async () => {
    await expect(kafkaSasl({ KAFKA_SASL_MECHANISM: 'scram-sha-512', KAFKA_SASL_USERNAME: 'gateway', KAFKA_SASL_PASSWORD_FILE: path.join(dir, 'missing') })).rejects.toThrow(
      /cannot be read \(ENOENT\)/,
    );
    const empty = path.join(dir, 'empty');
    await writeFile(empty, '\n');
    await expect(kafkaSasl({ KAFKA_SASL_MECHANISM: 'scram-sha-512', KAFKA_SASL_USERNAME: 'gateway', KAFKA_SASL_PASSWORD_FILE: empty })).rejects.toThrow(/one non-empty line/);
  });
});
