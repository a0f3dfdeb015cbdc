export { startIdp, IDP_GROUP } from './idp';
export { openIdentityDatabase } from './identity-database';
export type { IdpHandle, IdpLogger, IdpOptions } from './idp';
export { resolveAdminCredentials } from './admin-credentials';
export type { AdminCredentials, ResolveAdminCredentialsOptions } from './admin-credentials';
export { IdpConfigSchema, KeyEncryptionKeySchema, KeyPublishDelaySchema } from './idp.config';
export { resolveKeyEncryptionKey } from './keys/idp-keys';
export { parseTestPublishedKeys } from './keys/test-published-keys';
