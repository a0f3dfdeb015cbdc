export * from './tenant-context';
export * from './headers';
export * from './redis-keys';
export * from './trace-context';
export * from './request-context';
