import { z } from 'zod';

/** Payload of `identity.tenant.get`: the id is opaque to callers, so any string (a malformed one is simply not found). */
export const TenantIdSchema = z.strictObject({ id: z.string().min(1).max(200) });
