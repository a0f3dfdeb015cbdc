export * from './secret-hash';
export * from './key-envelope';
