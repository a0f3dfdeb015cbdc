export * from './embedded-postgres';
export * from './database';
export { deferWrite, pipelinedTransaction, queryAndCommit, queryInOneTrip } from './transaction-pipeline';
export * from './test-database';
export * from './outbox';
export * from './processed-messages';
export * from './row-level-security';
export * from './housekeeping';
export * from './data-keys';
