export * from './consequences';
export * from './manual-taker';
export * from './real-time-taker';
export * from './redis-server';
