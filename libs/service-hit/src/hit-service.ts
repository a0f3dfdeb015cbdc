import { MessageBus } from '@mission/messaging';

export interface HitServiceOptions {
  /** Not started yet: the service registers its handlers, the caller starts the bus. */
  readonly bus: MessageBus;
}

export interface HitServiceHandle {
  ready(): Promise<{ up: boolean; details: Record<string, unknown> }>;
  stop(): Promise<void>;
}

/**
 * Human approval tasks. The service is deployed and wired already; its requests (create, list,
 * decide) and the `hit.decided` event arrive with the human-approvals work.
 */
export async function startHitService(options: HitServiceOptions): Promise<HitServiceHandle> {
  return {
    ready: async () => ({ up: options.bus.health().up, details: {} }),
    stop: async () => undefined,
  };
}
