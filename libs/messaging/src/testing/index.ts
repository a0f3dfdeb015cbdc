export * from './bus-contract';
