import { MessageTypes, MissionCancelledEvent, ResourceIdSchema, parseOrThrow } from '@mission/contracts';
import { EventHandler, RequestHandler } from '@mission/messaging';
import { HitsService } from './hits.service';

/** Bus requests → HitsService calls. The tenant comes from the message, restored by the bus. */
export function hitRequestHandlers(hits: HitsService): Record<string, RequestHandler> {
  return {
    [MessageTypes.hitCreate]: (message) => hits.create(message.payload),
    [MessageTypes.hitGet]: (message) => hits.get(parseOrThrow(ResourceIdSchema, message.payload).id),
    [MessageTypes.hitListPending]: (message) => hits.listPending(message.payload),
    [MessageTypes.hitDecide]: (message) => hits.decide(message.payload),
  };
}

/** Mission events hit-service reacts to. */
export function missionEventHandler(hits: HitsService): EventHandler {
  return async (message) => {
    if (message.type !== MessageTypes.missionCancelled) return;
    await hits.cancelForMission(message.id, (message.payload as MissionCancelledEvent).missionId);
  };
}
