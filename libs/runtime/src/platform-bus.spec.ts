import { Registry } from 'prom-client';
import { z } from 'zod';
import { ConfigError, loadConfig } from '@mission/config';
import { KeyEncryptionKey, LocalKeyProvider } from '@mission/crypto';
import type { KafkaBus } from '@mission/messaging';
import { createLogger } from './logger';
import { type PayloadKeys } from './payload-keys';
import { BusSettings, platformKafkaBus } from './platform-bus';

describe('BusSettings', () => {
  const schema = z.object(BusSettings);

  it('defaults to 64 handlers in flight and a 15 s consumer session', () => {
    expect(loadConfig(schema, {})).toEqual({ BUS_MAX_IN_FLIGHT: 64, KAFKA_SESSION_TIMEOUT_MS: 15_000 });
  });

  it('takes a session timeout from 6 s (the broker’s minimum) to 45 s (under the 60 s a rebalance waits)', () => {
    expect(loadConfig(schema, { KAFKA_SESSION_TIMEOUT_MS: '6000' }).KAFKA_SESSION_TIMEOUT_MS).toBe(6_000);
    expect(loadConfig(schema, { KAFKA_SESSION_TIMEOUT_MS: '45000' }).KAFKA_SESSION_TIMEOUT_MS).toBe(45_000);
  });

  it.each(['5999', '45001', '1800000', '7500.5', 'soon'])('refuses KAFKA_SESSION_TIMEOUT_MS=%s, naming the variable', (value) => {
    expect(() => loadConfig(schema, { KAFKA_SESSION_TIMEOUT_MS: value })).toThrow(ConfigError);
    expect(() => loadConfig(schema, { KAFKA_SESSION_TIMEOUT_MS: value })).toThrow(/KAFKA_SESSION_TIMEOUT_MS/);
  });
});

describe('platformKafkaBus', () => {
  it('gives its consumers the configured session timeout', async () => {
    const config = { ...loadConfig(z.object(BusSettings), { KAFKA_SESSION_TIMEOUT_MS: '6000' }), KAFKA_BROKERS: ['127.0.0.1:1'], KAFKA_TLS: 'off' as const };
    const payloadKeys = { provider: new LocalKeyProvider(KeyEncryptionKey.generate()) } as unknown as PayloadKeys;
    const bus = await platformKafkaBus({ config, clientId: 'unit', payloadKeys, logger: createLogger('unit', 'error'), metrics: new Registry() });
    expect((bus as unknown as { fleet: { sessionTimeout: number } }).fleet.sessionTimeout).toBe(6_000);
    await (bus as KafkaBus).close();
  });
});
