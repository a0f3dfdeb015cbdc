import { z } from 'zod';
import { ConfigError, env, loadConfig } from './config';

const schema = z.object({
  PORT: env.port(3000),
  DATABASE_URL: env.url(['postgres', 'postgresql']).optional(),
  KAFKA_BROKERS: env.hostPorts().optional(),
});

describe('loadConfig', () => {
  it('applies defaults and treats empty variables as unset', () => {
    expect(loadConfig(schema, { DATABASE_URL: '' })).toEqual({ PORT: 3000 });
  });

  it('parses typed values', () => {
    const config = loadConfig(schema, { PORT: '8080', KAFKA_BROKERS: 'a:9092, b:9093', DATABASE_URL: 'postgres://u@h/db' });
    expect(config).toEqual({ PORT: 8080, KAFKA_BROKERS: ['a:9092', 'b:9093'], DATABASE_URL: 'postgres://u@h/db' });
  });

  it('lists every bad variable at once, without echoing values', () => {
    let error: unknown;
    try {
      loadConfig(schema, { PORT: 'eighty', DATABASE_URL: 'mysql://root:hunter2@h/db', KAFKA_BROKERS: 'nohost' });
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const problems = (error as ConfigError).problems;
    expect(problems.map((p) => p.split(':')[0]).sort()).toEqual(['DATABASE_URL', 'KAFKA_BROKERS', 'PORT']);
    expect((error as Error).message).not.toContain('hunter2');
  });
});

describe('env.origins', () => {
  const origins = z.object({ ORIGINS: env.origins().default([]) });

  it('reads a comma-separated list of origins', () => {
    expect(loadConfig(origins, { ORIGINS: 'https://app.example.com, http://127.0.0.1:5173' }).ORIGINS).toEqual(['https://app.example.com', 'http://127.0.0.1:5173']);
    expect(loadConfig(origins, {}).ORIGINS).toEqual([]);
  });

  it('refuses paths, trailing slashes and non-URLs with a message naming the variable', () => {
    for (const bad of ['https://app.example.com/', 'https://app.example.com/mcp', 'app.example.com', 'https://a.example, nope']) {
      expect(() => loadConfig(origins, { ORIGINS: bad })).toThrow(/ORIGINS.*origins/s);
    }
  });
});
