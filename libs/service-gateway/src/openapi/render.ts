import { InProcessBroker, InProcessBus } from '@mission/messaging';
import { createLogger } from '@mission/runtime';
import { TenantEventFeed } from '../events/tenant-event-feed';
import { createGateway } from '../gateway';
import { OPENAPI_JSON_PATH, REFERENCE_URLS } from './document';

/**
 * The gateway's OpenAPI document as it serves it, rendered without a network or any service: a
 * gateway on an unstarted in-process bus answers `GET /api/openapi.json` in memory. Formatted as
 * committed in libs/api-client/openapi.json.
 */
export async function renderOpenApiDocument(urls: { publicUrl: string; issuer: string } = REFERENCE_URLS): Promise<string> {
  const bus = new InProcessBus(new InProcessBroker());
  const app = await createGateway({
    ...urls,
    jwksUri: `${urls.issuer}/jwks`,
    bus,
    events: new TenantEventFeed(bus),
    logger: createLogger('openapi', 'error'),
    rateLimits: { enabled: false },
  });
  try {
    const response = await app.getHttpAdapter().getInstance().inject({ method: 'GET', url: OPENAPI_JSON_PATH });
    if (response.statusCode !== 200) throw new Error(`GET ${OPENAPI_JSON_PATH} answered ${response.statusCode}`);
    return `${JSON.stringify(JSON.parse(response.body), null, 2)}\n`;
  } finally {
    await app.close();
  }
}
