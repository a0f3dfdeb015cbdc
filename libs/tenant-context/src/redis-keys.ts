import { currentTenant } from './tenant-context';

/** A Redis key namespaced by the current tenant: `<prefix>:t:<tenantId>:<parts…>`. */
export function tenantRedisKey(prefix: string, ...parts: string[]): string {
  return [prefix, 't', currentTenant().tenantId, ...parts].join(':');
}
