import { Messages, Topics } from '@mission/contracts';
import { on, RequestHandler, requestHandlers } from '@mission/messaging';
import { BrainService } from './brain.service';

/** Bus requests → BrainService calls. The tenant comes from the message, restored by the bus. */
export function brainRequestHandlers(brain: BrainService): Record<string, RequestHandler> {
  return requestHandlers(Topics.brainRequests, [
    on(Messages.brainQuery, (query) => brain.query(query)),
    on(Messages.brainDocumentIngest, (command) => brain.ingest(command)),
    on(Messages.brainDocumentList, (query) => brain.list(query)),
    on(Messages.brainDocumentGet, ({ id }) => brain.get(id)),
    on(Messages.brainDocumentPassages, (query) => brain.passages(query)),
    on(Messages.brainDocumentDelete, ({ id }) => brain.delete(id)),
    on(Messages.brainUsageGet, () => brain.usage()),
  ]);
}
