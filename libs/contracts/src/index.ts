export * from './errors';
export * from './topics';
export * from './validation';
export * from './scopes';
export * from './tenants';
export * from './brain';
export * from './missions';
