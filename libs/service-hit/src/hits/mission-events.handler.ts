import { MessageTypes, MissionEventSchemas } from '@mission/contracts';
import { EventHandler, eventHandlers } from '@mission/messaging';
import { HitsService } from './hits.service';

/** Mission events hit-service reacts to. */
export function missionEventHandler(hits: Pick<HitsService, 'cancelForMission'>): EventHandler {
  return eventHandlers(MissionEventSchemas, {
    [MessageTypes.missionCancelled]: (cancelled, message) => hits.cancelForMission(message.id, cancelled.missionId),
  });
}
