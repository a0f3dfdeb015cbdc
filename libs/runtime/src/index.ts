export * from './logger';
export * from './health-server';
export * from './shutdown';
export * from './service-main';
export * from './metrics';
export * from './payload-keys';
export * from './tls-settings';
export * from './platform-bus';
