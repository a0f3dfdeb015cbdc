export * from './secret-hash';
export * from './key-envelope';
export * from './key-provider';
export * from './data-key';
export * from './transit-cipher';
export * from './secret-file';
