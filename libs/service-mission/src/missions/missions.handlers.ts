import { MessageTypes, parseOrThrow, ResourceIdSchema } from '@mission/contracts';
import { RequestHandler } from '@mission/messaging';
import { MissionsService } from './missions.service';

/** Bus requests → MissionsService calls. The tenant comes from the message, restored by the bus. */
export function missionRequestHandlers(missions: MissionsService): Record<string, RequestHandler> {
  return {
    [MessageTypes.missionSubmit]: (message) => missions.submit(message.payload),
    [MessageTypes.missionGet]: (message) => missions.get(parseOrThrow(ResourceIdSchema, message.payload).id),
    [MessageTypes.missionList]: (message) => missions.list(message.payload),
    [MessageTypes.missionCancel]: (message) => missions.cancel(parseOrThrow(ResourceIdSchema, message.payload).id),
  };
}
