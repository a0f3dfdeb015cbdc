import { MessageTypes, parseOrThrow, ResourceIdSchema } from '@mission/contracts';
import { RequestHandler } from '@mission/messaging';
import { BrainService } from './brain.service';

/** Bus requests → BrainService calls. The tenant comes from the message, restored by the bus. */
export function brainRequestHandlers(brain: BrainService): Record<string, RequestHandler> {
  return {
    [MessageTypes.brainQuery]: (message) => brain.query(message.payload),
    [MessageTypes.brainDocumentIngest]: (message) => brain.ingest(message.payload),
    [MessageTypes.brainDocumentList]: (message) => brain.list(message.payload),
    [MessageTypes.brainDocumentGet]: (message) => brain.get(parseOrThrow(ResourceIdSchema, message.payload).id),
    [MessageTypes.brainDocumentDelete]: (message) => brain.delete(parseOrThrow(ResourceIdSchema, message.payload).id),
    [MessageTypes.brainUsageGet]: () => brain.usage(),
  };
}
