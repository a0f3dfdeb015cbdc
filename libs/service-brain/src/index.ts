export * from './brain-service';
export * from './brain.config';
export type { TenantIndexKeys } from './index/blind-index';
