import { Messages, Topics } from '@mission/contracts';
import { on, RequestHandler, requestHandlers } from '@mission/messaging';
import { MissionsService } from './missions.service';

/** Bus requests → MissionsService calls. The tenant comes from the message, restored by the bus. */
export function missionRequestHandlers(missions: MissionsService): Record<string, RequestHandler> {
  return requestHandlers(Topics.missionRequests, [
    on(Messages.missionSubmit, (command) => missions.submit(command)),
    on(Messages.missionGet, ({ id }) => missions.get(id)),
    on(Messages.missionList, (query) => missions.list(query)),
    on(Messages.missionCancel, ({ id }) => missions.cancel(id)),
  ]);
}
