export * from './gateway';
export * from './gateway.options';
export * from './gateway.config';
