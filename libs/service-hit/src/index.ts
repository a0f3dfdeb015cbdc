export * from './hit-service';
