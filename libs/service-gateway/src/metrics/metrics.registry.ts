/** The gateway's Prometheus registry (one per gateway instance, so several can share a process). */
export const METRICS = Symbol('METRICS');
