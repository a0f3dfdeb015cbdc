export * from './policy';
export * from './clock';
export * from './token-bucket';
export * from './decision';
export * from './memory-bucket-store';
export * from './redis-bucket-store';
export * from './leased-buckets';
export * from './rate-limiter';
