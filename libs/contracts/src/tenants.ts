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

export const CreateTenantSchema = z
  .strictObject({
    name: z.string().trim().min(1).max(200),
    tier: z.enum(TIERS),
    rpm: z.int().min(1).max(MAX_ENTERPRISE_RPM).optional(),
  })
  .superRefine((value, ctx) => {
    if (value.tier === 'enterprise' && value.rpm === undefined) {
      ctx.addIssue({ code: 'custom', path: ['rpm'], message: 'rpm is required for the enterprise tier' });
    }
    if (value.tier !== 'enterprise' && value.rpm !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['rpm'], message: 'rpm can only be set for the enterprise tier' });
    }
  });
export type CreateTenantRequest = z.output<typeof CreateTenantSchema>;

export interface ClientCredentialsView {
  readonly clientId: string;
  readonly clientSecret: string;
  readonly scopes: readonly (typeof TENANT_SCOPES)[number][];
}

export interface TenantView {
  readonly id: string;
  readonly name: string;
  readonly tier: Tier;
  readonly rpm: number;
  readonly createdAt: string;
}

export interface CreatedTenantView extends TenantView {
  readonly client: ClientCredentialsView;
}

export function rpmFor(tier: Tier, customRpm: number | null | undefined): number {
  if (tier === 'enterprise') {
    if (!customRpm) throw new Error('An enterprise tenant needs its own rpm');
    return customRpm;
  }
  return TIER_RPM[tier];
}
