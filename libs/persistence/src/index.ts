export * from './embedded-postgres';
export * from './database';
export * from './test-database';
export * from './outbox';
export * from './processed-messages';
