export * from './brain-service';
