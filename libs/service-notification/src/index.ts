export * from './notification-service';
