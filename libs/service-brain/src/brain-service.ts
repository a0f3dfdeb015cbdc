import { Topics } from '@mission/contracts';
import { MessageBus } from '@mission/messaging';
import { brainRequestHandlers } from './brain/brain.handlers';
import { BrainService } from './brain/brain.service';

export const BRAIN_SERVICE_GROUP = 'brain-service';

export interface BrainServiceOptions {
  /** Not started yet: the service registers its handlers, the caller starts the bus. */
  readonly bus: MessageBus;
}

export interface BrainServiceHandle {
  ready(): Promise<{ up: boolean; details: Record<string, unknown> }>;
  stop(): Promise<void>;
}

export async function startBrainService(options: BrainServiceOptions): Promise<BrainServiceHandle> {
  options.bus.serve(Topics.brainRequests, BRAIN_SERVICE_GROUP, brainRequestHandlers(new BrainService()));
  return {
    ready: async () => ({ up: true, details: {} }),
    stop: async () => undefined,
  };
}
