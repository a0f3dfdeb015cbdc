import { Messages, Topics } from '@mission/contracts';
import { on, RequestHandler, requestHandlers } from '@mission/messaging';
import { HitsService } from './hits.service';

/** Bus requests → HitsService calls. The tenant comes from the message, restored by the bus. */
export function hitRequestHandlers(hits: HitsService): Record<string, RequestHandler> {
  return requestHandlers(Topics.hitRequests, [
    on(Messages.hitCreate, (request) => hits.create(request)),
    on(Messages.hitGet, ({ id }) => hits.get(id)),
    on(Messages.hitListPending, (query) => hits.listPending(query)),
    on(Messages.hitDecide, (decision) => hits.decide(decision)),
  ]);
}
