export * from './bus';
export * from './delivery';
export * from './in-process/in-process-bus';
export * from './kafka/kafka-bus';
export * from './payload-codec';
export * from './unavailable';
export * from './dispatch';
export * from './replies';
