export * from './mission-service';
