export * from './mission-service';
export { requestFingerprint } from './missions/missions.service';
