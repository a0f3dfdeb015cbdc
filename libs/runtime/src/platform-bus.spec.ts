import { z } from 'zod';
import { ConfigError, loadConfig } from '@mission/config';
import { BusSettings } from './platform-bus';

describe('BusSettings', () => {
  const schema = z.object(BusSettings);

  it('defaults to 64 handlers in flight and a 15 s consumer session', () => {
    expect(loadConfig(schema, {})).toEqual({ BUS_MAX_IN_FLIGHT: 64, KAFKA_SESSION_TIMEOUT_MS: 15_000 });
  });

  it('takes a session timeout from 6 s to 30 min, the broker’s own bounds', () => {
    expect(loadConfig(schema, { KAFKA_SESSION_TIMEOUT_MS: '6000' }).KAFKA_SESSION_TIMEOUT_MS).toBe(6_000);
    expect(loadConfig(schema, { KAFKA_SESSION_TIMEOUT_MS: '1800000' }).KAFKA_SESSION_TIMEOUT_MS).toBe(1_800_000);
  });

  it.each(['5999', '1800001', '7500.5', 'soon'])('refuses KAFKA_SESSION_TIMEOUT_MS=%s, naming the variable', (value) => {
    expect(() => loadConfig(schema, { KAFKA_SESSION_TIMEOUT_MS: value })).toThrow(ConfigError);
    expect(() => loadConfig(schema, { KAFKA_SESSION_TIMEOUT_MS: value })).toThrow(/KAFKA_SESSION_TIMEOUT_MS/);
  });
});
