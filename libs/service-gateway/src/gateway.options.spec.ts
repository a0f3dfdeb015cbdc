import { GatewayConfigSchema } from './gateway.config';
import { gatewayOptionsFrom } from './gateway.options';

describe('gatewayOptionsFrom', () => {
  const required = { PUBLIC_URL: 'https://gateway.example', IDP_ISSUER: 'https://idp.example', KAFKA_BROKERS: '127.0.0.1:9092' };

  it('gives the token verifier a JWKS cooldown of 30 s by default, and the configured one otherwise', async () => {
    expect((await gatewayOptionsFrom(GatewayConfigSchema.parse(required))).jwksCooldownMs).toBe(30_000);
    expect((await gatewayOptionsFrom(GatewayConfigSchema.parse({ ...required, GATEWAY_JWKS_COOLDOWN_SECONDS: '1' }))).jwksCooldownMs).toBe(1_000);
  });

  it.each(['0', '-1', '1.5', '3601', 'soon'])('refuses GATEWAY_JWKS_COOLDOWN_SECONDS=%s', (value) => {
    expect(GatewayConfigSchema.safeParse({ ...required, GATEWAY_JWKS_COOLDOWN_SECONDS: value }).success).toBe(false);
  });
});
