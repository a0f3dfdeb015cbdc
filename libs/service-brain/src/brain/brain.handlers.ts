import { MessageTypes } from '@mission/contracts';
import { RequestHandler } from '@mission/messaging';
import { BrainService } from './brain.service';

export function brainRequestHandlers(brain: BrainService): Record<string, RequestHandler> {
  return {
    [MessageTypes.brainQuery]: (message) => brain.query(message.payload),
  };
}
