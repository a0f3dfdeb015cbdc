import './tracing';
import 'reflect-metadata';
import { ConfigError, loadConfig } from '@mission/config';
import { assertHttpsIssuer, createLogger, createMetricsRegistry, onShutdownSignal, platformKafkaBus, resolvePayloadKeys, serverTls, startHealthServer } from '@mission/runtime';
import { createGateway, GatewayConfigSchema, gatewayOptionsFrom, GatewayReadiness, TenantEventFeed } from '@mission/service-gateway';

async function main(): Promise<void> {
  const config = loadConfig(GatewayConfigSchema);
  const logger = createLogger('gateway', config.LOG_LEVEL);
  const tls = await serverTls(config);
  assertHttpsIssuer(tls, config.IDP_ISSUER);
  const jwks = config.IDP_JWKS_URI ? new URL(config.IDP_JWKS_URI) : undefined;
  if (jwks?.protocol === 'http:' && !['127.0.0.1', 'localhost', '[::1]'].includes(jwks.hostname)) {
    logger.warn(
      { jwksUri: config.IDP_JWKS_URI },
      'The signing keys are fetched over plain HTTP: anyone who can spoof that host can forge tokens; use https (k8s/README.md, TLS and keys)',
    );
  }
  const metrics = createMetricsRegistry('gateway');
  const bus = await platformKafkaBus({ config, clientId: 'gateway', payloadKeys: await resolvePayloadKeys(config), logger, metrics });
  // The stream's feed subscribes on the bus: before it starts.
  const events = new TenantEventFeed(bus);
  await bus.start();
  const app = await createGateway({
    publicUrl: config.PUBLIC_URL,
    issuer: config.IDP_ISSUER,
    jwksUri: config.IDP_JWKS_URI,
    bus,
    events,
    logger,
    trustProxy: config.TRUST_PROXY,
    tls,
    ...(await gatewayOptionsFrom(config)),
    metrics,
  });
  await app.listen(config.PORT, config.HOST);
  // Metrics and readiness details on a port of their own, which only monitoring may reach.
  const readiness = app.get(GatewayReadiness);
  const ops = await startHealthServer(config.HOST, config.OPS_PORT, () => readiness.check(), metrics);
  logger.info({ port: config.PORT, opsPort: ops.port, tls: Boolean(tls) }, 'Gateway listening');
  onShutdownSignal(logger, async () => {
    await app.close();
    await bus.close();
    await ops.close();
  });
}

main().catch((error: unknown) => {
  process.stderr.write(error instanceof ConfigError ? `${error.message}\n` : `gateway failed to start: ${error instanceof Error ? error.stack : String(error)}\n`);
  process.exit(1);
});
