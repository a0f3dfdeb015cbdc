export * from './notification-service';
export * from './notification.config';
