export const Scopes = {
  missionsRead: 'missions:read',
  missionsWrite: 'missions:write',
  brainRead: 'brain:read',
  brainWrite: 'brain:write',
  hitsRead: 'hits:read',
  hitsApprove: 'hits:approve',
  webhooksManage: 'webhooks:manage',
  platformAdmin: 'platform:admin',
} as const;
export type Scope = (typeof Scopes)[keyof typeof Scopes];

/** What a tenant client gets unless created with fewer. */
export const TENANT_SCOPES = [Scopes.missionsRead, Scopes.missionsWrite, Scopes.brainRead, Scopes.brainWrite, Scopes.hitsRead, Scopes.hitsApprove, Scopes.webhooksManage] as const;
export type TenantScope = (typeof TENANT_SCOPES)[number];
