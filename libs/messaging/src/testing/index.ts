export * from './bus-contract';
export * from './domain-error-of';
