export * from './gateway';
export * from './gateway.options';
export * from './gateway.config';
export { renderOpenApiDocument } from './openapi/render';
export { OPENAPI_JSON_PATH, OPENAPI_UI_PATH, REFERENCE_URLS } from './openapi/document';
export { GatewayReadiness } from './health/readiness';
export type { GatewayReadinessReport } from './health/readiness';
export { TenantEventFeed } from './events/tenant-event-feed';
