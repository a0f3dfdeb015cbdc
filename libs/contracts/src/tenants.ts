import { z } from 'zod';
import { TENANT_SCOPES } from './scopes';

export const TIERS = ['starter', 'business', 'professional', 'enterprise'] as const;
export type Tier = (typeof TIERS)[number];

/** Requests per minute of each tier; enterprise tenants carry their own. */
export const TIER_RPM: Readonly<Record<Exclude<Tier, 'enterprise'>, number>> = {
  starter: 100,
  business: 500,
  professional: 2000,
};

export const MAX_ENTERPRISE_RPM = 1_000_000;

/** What a tenant may store in the Brain: documents, and bytes of their content (UTF-8). */
export interface StorageQuota {
  readonly documents: number;
  readonly bytes: number;
}

const MIB = 1024 * 1024;
const GIB = 1024 * MIB;

/** Each tier's storage quota; an enterprise tenant's is this unless the operator set its own. */
export const TIER_STORAGE: Readonly<Record<Tier, StorageQuota>> = {
  starter: { documents: 1_000, bytes: 100 * MIB },
  business: { documents: 10_000, bytes: GIB },
  professional: { documents: 100_000, bytes: 10 * GIB },
  enterprise: { documents: 1_000_000, bytes: 100 * GIB },
};

/** The largest storage quota the operator may give an enterprise tenant. */
export const MAX_STORAGE_QUOTA: StorageQuota = { documents: 100_000_000, bytes: 100 * 1024 * GIB };

/** An enterprise tenant's own storage quota (either part may be left at the tier's). */
const StorageQuotaSchema = z
  .strictObject({
    documents: z.int().min(0).max(MAX_STORAGE_QUOTA.documents).optional(),
    bytes: z.int().min(0).max(MAX_STORAGE_QUOTA.bytes).optional(),
  })
  .refine((value) => value.documents !== undefined || value.bytes !== undefined, { message: 'give documents, bytes or both' });

/** The storage quota of a tenant: its tier's, or for an enterprise tenant what the operator set. */
export function storageFor(tier: Tier, custom: { readonly documents?: number | null; readonly bytes?: number | null } = {}): StorageQuota {
  const defaults = TIER_STORAGE[tier];
  if (tier !== 'enterprise') return defaults;
  return { documents: custom.documents ?? defaults.documents, bytes: custom.bytes ?? defaults.bytes };
}

export const CreateTenantSchema = z
  .strictObject({
    name: z.string().trim().min(1).max(200),
    tier: z.enum(TIERS),
    rpm: z.int().min(1).max(MAX_ENTERPRISE_RPM).optional(),
    storage: StorageQuotaSchema.optional(),
  })
  .superRefine((value, ctx) => {
    if (value.tier === 'enterprise' && value.rpm === undefined) {
      ctx.addIssue({ code: 'custom', path: ['rpm'], message: 'rpm is required for the enterprise tier' });
    }
    if (value.tier !== 'enterprise' && value.rpm !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['rpm'], message: 'rpm can only be set for the enterprise tier' });
    }
    if (value.tier !== 'enterprise' && value.storage !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['storage'], message: 'storage can only be set for the enterprise tier' });
    }
  });
export type CreateTenantRequest = z.output<typeof CreateTenantSchema>;

/**
 * Body of `PATCH /admin/tenants/:id`. Whether rpm is required or allowed depends on the tier the
 * tenant ends up with, which the identity provider checks against the stored tenant.
 */
export const UpdateTenantSchema = z
  .strictObject({
    tier: z.enum(TIERS).optional(),
    rpm: z.int().min(1).max(MAX_ENTERPRISE_RPM).optional(),
    storage: StorageQuotaSchema.optional(),
  })
  .refine((value) => value.tier !== undefined || value.rpm !== undefined || value.storage !== undefined, { message: 'give tier, rpm, storage or several' })
  .superRefine((value, ctx) => {
    if (value.tier !== undefined && value.tier !== 'enterprise' && value.rpm !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['rpm'], message: 'rpm can only be set for the enterprise tier' });
    }
    if (value.tier !== undefined && value.tier !== 'enterprise' && value.storage !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['storage'], message: 'storage can only be set for the enterprise tier' });
    }
  });
export type UpdateTenantRequest = z.output<typeof UpdateTenantSchema>;

/** Payload of `identity.tenant.update`: the tenant id and the validated patch. */
export const UpdateTenantCommandSchema = z.strictObject({ id: z.string().min(1).max(200), patch: z.unknown() });

const TenantScopeListSchema = z
  .array(z.enum(TENANT_SCOPES))
  .min(1, 'give at least one scope, or leave scopes out for all seven')
  .max(TENANT_SCOPES.length)
  .refine((scopes) => new Set(scopes).size === scopes.length, { message: 'scopes must not repeat' });

/** Redirect URIs of a client that signs users in (authorization_code): absolute http(s), no fragment. */
const RedirectUriSchema = z
  .string()
  .max(2_000)
  .refine((value) => {
    const url = URL.parse(value);
    return url !== null && (url.protocol === 'https:' || url.protocol === 'http:') && url.hash === '' && !url.username && !url.password;
  }, 'must be an absolute http(s) URI without fragment or credentials');

/** Body of `POST /admin/tenants/:id/clients`. A client with redirect URIs may also sign users in. */
export const CreateClientSchema = z.strictObject({
  scopes: TenantScopeListSchema.optional(),
  redirectUris: z.array(RedirectUriSchema).min(1).max(10).optional(),
});
export type CreateClientRequest = z.output<typeof CreateClientSchema>;

export const USER_PASSWORD_MIN_LENGTH = 12;
export const USER_PASSWORD_MAX_LENGTH = 1_024;

/** Body of `POST /admin/tenants/:id/users`. Usernames are unique within a tenant, case-insensitively. */
export const UsernameSchema = z
  .string()
  .trim()
  .min(1)
  .max(100)
  .regex(/^[A-Za-z0-9._@+-]+$/, 'letters, digits and . _ @ + - only');

export const CreateUserSchema = z.strictObject({
  username: UsernameSchema,
  password: z
    .string()
    .min(USER_PASSWORD_MIN_LENGTH, `at least ${USER_PASSWORD_MIN_LENGTH} characters`)
    .max(USER_PASSWORD_MAX_LENGTH, `at most ${USER_PASSWORD_MAX_LENGTH} characters`),
  scopes: TenantScopeListSchema.optional(),
});
export type CreateUserRequest = z.output<typeof CreateUserSchema>;

/**
 * Payload of `identity.user.create`. The gateway hashes the password before it goes on the bus,
 * so no broker log or replay ever holds it; the idp checks the hash's form and stores it.
 */
export const CreateUserCommandSchema = z.strictObject({
  tenantId: z.string().min(1).max(200),
  username: UsernameSchema,
  passwordHash: z.string().min(1).max(512),
  scopes: TenantScopeListSchema.optional(),
});
export type CreateUserCommand = z.output<typeof CreateUserCommandSchema>;

/** Payload of `identity.client.create`: the tenant id and the body. */
export const TenantSubresourceCommandSchema = z.strictObject({ tenantId: z.string().min(1).max(200), body: z.unknown() });

export interface ClientCredentialsView {
  readonly clientId: string;
  readonly clientSecret: string;
  readonly scopes: readonly (typeof TENANT_SCOPES)[number][];
  readonly redirectUris?: readonly string[];
}

/** A tenant's user, as the operator API shows it: never the password or its hash. */
export interface UserView {
  readonly id: string;
  readonly tenantId: string;
  readonly username: string;
  readonly scopes: readonly (typeof TENANT_SCOPES)[number][];
  readonly createdAt: string;
}

export interface TenantView {
  readonly id: string;
  readonly name: string;
  readonly tier: Tier;
  readonly rpm: number;
  /** What the tenant may store in the Brain. */
  readonly storage: StorageQuota;
  readonly createdAt: string;
}

/** Answer of `GET /admin/tenants/:id/usage`: what the tenant stores in the Brain against its quota. */
export interface TenantUsageView {
  readonly tenantId: string;
  readonly documents: { readonly used: number; readonly limit: number };
  readonly bytes: { readonly used: number; readonly limit: number };
}

export interface CreatedTenantView extends TenantView {
  readonly client: ClientCredentialsView;
}

/** Answer of `POST /admin/keys/rotate`: the new key is in the JWKS now and signs from `activatesAt`. */
export interface SigningKeyRotationView {
  readonly kid: string;
  readonly state: 'published';
  readonly activatesAt: string;
}

export function rpmFor(tier: Tier, customRpm: number | null | undefined): number {
  if (tier === 'enterprise') {
    if (!customRpm) throw new Error('An enterprise tenant needs its own rpm');
    return customRpm;
  }
  return TIER_RPM[tier];
}
